# Sourced by tools/mutants.sh and tools/mutagen.sh, from the repository's
# root: one scratch copy of the working tree in which a mutant's patch is
# applied and built.
#
# scratch_sync DIR: DIR holds the working tree's files (tracked, and
# untracked ones not ignored), as they are now. A file is copied when it
# differs from the copy (a fresh mtime: make recompiles it), so the last
# mutant's files are restored before the next one's are patched, and a
# mutant after the first recompiles only what its patch and the last one's
# touch; files gone from the tree go from the copy. DIR.files lists the
# copy's files.
scratch_sync() {
  local src=$1 f
  mkdir -p "$src"
  git ls-files -co --exclude-standard | LC_ALL=C sort > "$src.files.new" || return 1
  if [ -f "$src.files" ]; then
    LC_ALL=C comm -23 "$src.files" "$src.files.new" | while IFS= read -r f; do rm -f "$src/$f"; done
  fi
  while IFS= read -r f; do
    [ -f "$f" ] || continue
    cmp -s "$f" "$src/$f" && continue
    mkdir -p "$src/$(dirname "$f")" && cp "$f" "$src/$f" || return 1
  done < "$src.files.new"
  mv -f "$src.files.new" "$src.files"
}
