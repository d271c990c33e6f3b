#!/bin/bash
# Grades the episode: the trusted game in this directory replays the agent's action log
# ({{log_path}}) from the task's starting inventory and writes reward.json plus
# {{verdict_file}} (with the reason) to the verifier's log directory.
# PLATOON_SANDBOX_ROOT is set when platoon's process provider runs this on the host with the sandbox's
# files below it; in a container it is unset and the paths are the container's own.
set -u
root="${PLATOON_SANDBOX_ROOT:-}"
tests="$root/tests"
out="$root/logs/verifier"
exec python3 -I "$tests/{{game_file}}" verify --task "$tests/{{task_file}}" --recipes "$tests/{{recipes_file}}" \
  --root "$root/" --log {{log_relpath}} --out "$out"
