# The Debian archive this machine's apt already uses, so that no script names a host.
#
#   apt_archive CODENAME [SKIP_FILE]
#
# Prints "URI<TAB>Signed-By" (Signed-By may be empty) of the first enabled binary ("deb")
# source for CODENAME, from deb822 *.sources files first, then one-line sources.list;
# SKIP_FILE (a list a script wrote itself) is passed over. Returns 1 when there is none.
apt_archive() {
  local codename="$1" skip="${2:-}" f

  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    [ "$f" = "$skip" ] && continue
    awk -v want="$codename" '
      function flush() {
        if (uris != "" && enabled && types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " want " ")) {
          split(uris, u, " ")
          printf "%s\t%s\n", u[1], signed
          found = 1; exit
        }
        types = uris = suites = signed = ""; enabled = 1; field = ""
      }
      BEGIN { enabled = 1 }
      /^[[:space:]]*#/ { next }
      /^[[:space:]]*$/ { flush(); next }
      /^[[:space:]]/ { next }   # continuation line (e.g. inline key block)
      {
        key = tolower($0); sub(/:.*/, "", key)
        val = $0; sub(/^[^:]*:[[:space:]]*/, "", val); sub(/[[:space:]]+$/, "", val)
        if (key == "types") types = val
        else if (key == "uris") uris = val
        else if (key == "suites") suites = val
        else if (key == "enabled") enabled = (tolower(val) != "no")
        else if (key == "signed-by") signed = (val ~ /^\//) ? val : ""
      }
      END { if (!found) flush() }
    ' "$f" | head -n 1 | grep . && return 0
  done

  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk -v want="$codename" '
      /^[[:space:]]*deb[[:space:]]/ {
        line = $0
        signed = ""
        if (match(line, /\[[^]]*\]/)) {
          opts = substr(line, RSTART + 1, RLENGTH - 2)
          line = substr(line, 1, RSTART - 1) substr(line, RSTART + RLENGTH)
          n = split(opts, o, /[[:space:]]+/)
          for (i = 1; i <= n; i++) if (o[i] ~ /^signed-by=/) { signed = o[i]; sub(/^signed-by=/, "", signed) }
        }
        split(line, w, /[[:space:]]+/)
        # w[1] may be empty if the line was indented
        k = (w[1] == "") ? 2 : 1
        if (w[k] == "deb" && w[k + 2] == want) { printf "%s\t%s\n", w[k + 1], signed; exit }
      }
    ' "$f" | head -n 1 | grep . && return 0
  done
  return 1
}
