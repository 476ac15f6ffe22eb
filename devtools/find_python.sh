#!/bin/sh
# Prints the path of a working python<VERSION> (on PATH, or installed by pyenv, uv or asdf), or nothing.
# A pyenv shim on PATH for a version that is installed but not selected fails to run: it is skipped.
version="$1"
for candidate in "$(command -v "python$version")" \
	"$HOME"/.pyenv/versions/"$version"*/bin/python"$version" \
	"$HOME"/.local/share/uv/python/cpython-"$version"*/bin/python"$version" \
	"$HOME"/.asdf/installs/python/"$version"*/bin/python"$version"; do
	if [ -x "$candidate" ] && "$candidate" -c 'import sys' 2>/dev/null; then
		echo "$candidate"
		exit 0
	fi
done
