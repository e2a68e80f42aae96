#!/bin/sh
# Bazel's --workspace_status_command (.bazelrc): the git commit of the
# workspace, for builds with --config=stamp (common:build_commit). Prints nothing
# where there is no git checkout (a container build); never fails the build.
commit=$(git rev-parse --short=12 HEAD 2>/dev/null) || exit 0
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  commit="$commit-modified"
fi
echo "STABLE_GIT_COMMIT $commit"
