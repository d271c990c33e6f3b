#!/bin/bash
# {{task_name}}: replays its {{crafts}} gold crafts, each with the total the command takes, and finishes.
set -eu -o pipefail
# Outside a container (platoon's process provider) there is no wrapper on PATH; the sandbox's files
# sit below PLATOON_SANDBOX_ROOT, so call the game file there.
type textcraft >/dev/null 2>&1 || textcraft() {
  python3 -I "${PLATOON_SANDBOX_ROOT:-}{{game_dir}}/{{game_file}}" "$@"
}
{{commands}}
