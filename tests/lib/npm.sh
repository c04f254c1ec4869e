# tests/lib/npm.sh - sourced by the test scripts that use an npm package: npm_need NAME SPEC
# installs SPEC (e.g. openai@4) once into $NPM_DIR ($BUILD/npm) unless node_modules/NAME is
# there, and calls the script's skip() (which exits) without node/npm or when the registry
# cannot be reached. Not a test itself (tests/run.sh runs tests/*.sh only).
NPM_DIR=$BUILD/npm

npm_need() {
    command -v node >/dev/null && command -v npm >/dev/null || skip "node or npm absent"
    [ -d "$NPM_DIR/node_modules/$1" ] && return 0
    mkdir -p "$NPM_DIR"
    (cd "$NPM_DIR" && [ -f package.json ] || echo '{"private":true}' >package.json)
    (cd "$NPM_DIR" && timeout 600 npm install --no-audit --no-fund --silent "$2" >/dev/null 2>&1) ||
        skip "npm install $2 failed (no registry?)"
}
