// check.mjs - what the client tests share: check(name, cond, why) prints "ok NAME" or
// "FAIL NAME: why" and counts; attempt(name, fn) reports a throw as a failure; done() prints
// "N passed, N failed, 0 skipped" and exits with 1 on a failure.
let passed = 0, failed = 0;
export function check(name, cond, why = "") {
  if (cond) { passed++; console.log(`ok     ${name}`); }
  else { failed++; console.log(`FAIL   ${name}: ${why}`); }
}
export async function attempt(name, fn) {
  try { await fn(); }
  catch (e) { check(name, false, `threw ${e?.status ?? ""} ${e?.message ?? e}`); }
}
export function done() {
  console.log(`${passed} passed, ${failed} failed, 0 skipped`);
  process.exit(failed ? 1 : 0);
}
