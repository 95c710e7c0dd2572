#!/usr/bin/env bash
# Installs code-server (a real VS Code served to a browser) into a cache folder, offline from GitHub.
# A plain `npm install code-server` fails: its postinstall downloads from GitHub. This follows the checked
# recipe: install without scripts, then build the native parts and link what the postinstall would have.
#   install_code_server.sh DEST VERSION       (DEST/node_modules/.bin/code-server on success)
set -euo pipefail
dest=$1
version=$2
stamp="$dest/.installed-$version"
[ -f "$stamp" ] && exit 0

rm -rf "$dest"
mkdir -p "$dest"
cd "$dest"
echo '{"name":"xpiler-e2e-code-server","private":true}' > package.json
npm_quiet=(--no-audit --no-fund --loglevel=error)

echo "   npm install code-server@$version (no scripts)"
npm_config_nodedir=/usr npm install "${npm_quiet[@]}" --ignore-scripts "code-server@$version"
npm_config_nodedir=/usr npm rebuild "${npm_quiet[@]}" argon2

vscode=node_modules/code-server/lib/vscode
echo "   installing VS Code's own modules"
(cd "$vscode" && npm install "${npm_quiet[@]}" --omit=dev --ignore-scripts)
# @vscode/ripgrep's postinstall downloads rg from GitHub; Debian's rg does the same job.
mkdir -p "$vscode/node_modules/@vscode/ripgrep/bin"
cp "$(command -v rg)" "$vscode/node_modules/@vscode/ripgrep/bin/rg"
# node-pty's postinstall runs `npx node-gyp` (only to write compile_commands.json): let npx fetch it.
(cd "$vscode" && npm_config_yes=true npm_config_nodedir=/usr npm rebuild "${npm_quiet[@]}")
ln -sfn node_modules "$vscode/node_modules.asar"
ln -sfn code-linux.sh "$vscode/bin/remote-cli/code-server"
ln -sfn browser-linux.sh "$vscode/bin/helpers/browser.sh"
echo "   installing built-in extensions' modules"
(cd "$vscode/extensions" && npm install "${npm_quiet[@]}" --omit=dev)
touch "$stamp"
