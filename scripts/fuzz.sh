#!/usr/bin/env bash
# Runs every fuzz target in the module for FUZZTIME each (default 30s).
# Not part of CI: findings land in testdata/fuzz/ and become regression seeds.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-30s}
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		echo "== $pkg $target ($fuzztime)"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
	done
done
