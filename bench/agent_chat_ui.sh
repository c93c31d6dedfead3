#!/usr/bin/env bash
# Build Agent Chat UI for tests/integration/test_agent_chat_ui.py (by hand; not part of CI).
#
#   bench/agent_chat_ui.sh DIR [CHECKOUT]
#
# DIR/legacy: the web app of the `create-agent-chat-app` scaffold (0.1.6, from the npm
# registry), which renders the legacy Agent Inbox interrupt (accept / edit / respond / ignore).
# DIR/current (only if CHECKOUT is given): a checkout of the langchain-ai/agent-chat-ui
# repository, which renders LangChain v1's HITL request (approve / edit / reject).
# Both are installed from the npm registry and built with `next build`; the Google font of
# their layout is replaced by the system font, because the build cannot download it offline.
# Then: PLANEXEC_CHAT_UI_DIR=DIR python -m pytest tests/integration/test_agent_chat_ui.py
# (needs Node/npm, /usr/bin/chromium and `pip install playwright`; no `playwright install`).
set -euo pipefail
DIR=${1:?usage: bench/agent_chat_ui.sh DIR [CHECKOUT]}
CHECKOUT=${2:-}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
export NEXT_TELEMETRY_DISABLED=1

offline_font() {  # next/font/google fetches the font at build time
  perl -0pi -e 's/import \{ Inter \} from "next\/font\/google";\n//;
    s/const inter = Inter\(\{.*?\}\);/const inter = { className: "font-sans" };/s' \
    "$1/src/app/layout.tsx"
}

build() {
  (cd "$1" && npm install --no-audit --no-fund && npx next build)
}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
(cd "$scratch" && npx --yes create-agent-chat-app@0.1.6 -Y --project-name scaffold \
  --package-manager npm --install-deps false --framework nextjs --include-agent react)
rm -rf "$DIR/legacy"
cp -r "$scratch/scaffold/apps/web" "$DIR/legacy"
offline_font "$DIR/legacy"
build "$DIR/legacy"

if [ -n "$CHECKOUT" ]; then
  rm -rf "$DIR/current"
  mkdir -p "$DIR/current"
  (cd "$CHECKOUT" && tar --exclude=node_modules --exclude=.next --exclude=.git -cf - .) \
    | tar -xf - -C "$DIR/current"
  offline_font "$DIR/current"
  build "$DIR/current"
fi
echo "built: $(ls -d "$DIR"/*/.next | xargs -n1 dirname | tr '\n' ' ')"
