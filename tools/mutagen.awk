# The mechanical mutants of one C file (tools/mutagen.sh generate; docs/
# simulator.md, "Mechanical mutants"). POSIX awk: mawk will do.
#
# Variables: path (the file, from the repository's root), stem (the file's
# name in mutant names), del (1: the statement-deletion rule applies here),
# out (the folder of the patches). For each mutant it writes
# out/NAME.patch (a unified diff of path, for git apply) and prints
# NAME<TAB>rule<TAB>path:line<TAB>original<TAB>mutated<TAB>note (lines
# trimmed; a mutant of several lines has them joined by a blank). The note
# is "blind" for a mutant the simulator's memory model cannot tell from the
# original (docs/simulator.md, "Mechanical mutants"): an order weakened on
# a store, or on a read-modify-write (a CAS's either order) whose acquire
# it leaves as it was, or any order or CAS of a plain <stdatomic.h> call,
# which bypasses the model; else "-".
#
# Rules, each one change at one site inside a function body (preprocessor
# lines, comments and strings are never touched):
#   order    a memory_order_X argument one step weaker: a load (or a CAS's
#            failure order) seq_cst->acquire, acquire->relaxed; a store
#            seq_cst->release, release->relaxed; a read-modify-write (or a
#            CAS's success order, or a fence) seq_cst->acq_rel,
#            acq_rel->acquire and ->release, acquire/release->relaxed. A CAS
#            whose failure order would then be stronger than its success
#            order (a compile error) has it lowered with it.
#   cas      a compare-and-exchange made a load, a compare and a store (both
#            seq_cst: the atomicity is what goes, not the order); with atomic
#            points the store is a scheduling point, as in the planted
#            split-CAS bugs.
#   recheck  the statement right after an SH_YIELD (comments and assertions
#            aside), when it is an `if`/`while` or, in a bool function, a
#            `return` of a call or a load: its condition (or the value
#            returned) becomes `0 && (...)`.
#   cmp      a < <= > >= shifted to <= < >= >.
# No rule mutates an assertion (libc's assert among them).
#   del      (del=1) a one-line statement deleted: an assignment, a call, an
#            increment, a bare `return;`; not a declaration, a control
#            statement, a jump, an assertion, a (void) cast, a line of a
#            statement of several lines, nor the simulator's and the tests'
#            instruments (SH_YIELD, SH_FROM_USER, SH_MEM_FRESH, SH_TRACE*,
#            fault points): without one the code is as correct, only less
#            tested.
# A site's several mutants of one rule are named NAME-1, NAME-2, ...

{ L[NR] = $0 }

END {
  N = NR
  M = 0
  mask_all()
  scan_context()
  for (i = 1; i <= N; i++) {
    if (PP[i] || !INFN[i]) continue
    rule_order(i)
    rule_cas(i)
    rule_recheck(i)
    rule_cmp(i)
    if (del) rule_del(i)
  }
  emit_all()
}

function trim(s) {
  gsub(/^[ \t]+|[ \t]+$/, "", s)
  return s
}

# C[i]: line i with comments, strings and character literals blanked (same
# columns); PP[i]: a preprocessor line (or its continuation).
function mask_all(   i, s, out, j, n, c, c2, q, inc, ppcont) {
  inc = 0
  ppcont = 0
  for (i = 1; i <= N; i++) {
    s = L[i]
    out = ""
    n = length(s)
    j = 1
    while (j <= n) {
      c = substr(s, j, 1)
      c2 = substr(s, j, 2)
      if (inc) {
        if (c2 == "*/") { inc = 0; out = out "  "; j += 2 } else { out = out " "; j++ }
      } else if (c2 == "/*") {
        inc = 1; out = out "  "; j += 2
      } else if (c2 == "//") {
        while (j <= n) { out = out " "; j++ }
      } else if (c == "\"" || c == "'") {
        q = c; out = out c; j++
        while (j <= n && substr(s, j, 1) != q) {
          if (substr(s, j, 1) == "\\") { out = out " "; j++ }
          out = out " "; j++
        }
        if (j <= n) { out = out q; j++ }
      } else {
        out = out c; j++
      }
    }
    C[i] = out
    PP[i] = ppcont || out ~ /^[ \t]*#/
    ppcont = PP[i] && s ~ /\\$/
  }
}

# Per code line: START (it begins a statement), HEAD (the first word of its
# statement), INFN (in a function body at its start), PDEND (open parens at
# its end), BRACES (it holds a brace), FNHEAD (its function's signature).
function scan_context(   i, s, t, j, n, c, pd, bd, infn, prevend, acc, head, fnhead) {
  pd = 0; bd = 0; infn = 0; prevend = ";"; acc = ""; head = ""; fnhead = ""
  for (i = 1; i <= N; i++) {
    INFN[i] = infn && bd > 0
    FNHEAD[i] = fnhead
    if (PP[i]) continue
    s = C[i]
    t = trim(s)
    if (t == "") continue
    START[i] = (pd == 0 && index(";{}:", prevend) > 0)
    if (START[i]) {
      head = match(t, /^[A-Za-z_][A-Za-z0-9_]*/) ? substr(t, 1, RLENGTH) : substr(t, 1, 1)
    }
    HEAD[i] = head
    BRACES[i] = (s ~ /[{}]/)
    n = length(s)
    for (j = 1; j <= n; j++) {
      c = substr(s, j, 1)
      if (c == "{") {
        if (bd == 0) { infn = (acc ~ /\)[ \t]*$/ && acc !~ /=/); fnhead = acc }
        bd++; acc = ""
        continue
      }
      if (c == "}") {
        bd--; acc = ""
        if (bd == 0) infn = 0
        continue
      }
      if (c == "(") pd++
      else if (c == ")") pd--
      if (bd == 0) acc = (c == ";") ? "" : acc c
    }
    if (bd == 0) acc = acc " "
    PDEND[i] = pd
    prevend = substr(t, length(t), 1)
  }
}

# The column where line I's first assertion begins (its statement's head
# if the line continues one), past the end if none: no rule mutates a check.
function assert_col(i,   s) {
  if (is_assert(HEAD[i])) return 1
  s = C[i]
  if (match(s, /(^|[^A-Za-z0-9_])(SH_ASSERT|SH_DEBUG_ASSERT|SH_INVARIANT|static_assert|_Static_assert|assert)[ \t]*\(/))
    return RSTART
  return length(s) + 1
}

function is_assert(w) {
  return w ~ /^(SH_ASSERT|SH_DEBUG_ASSERT|SH_INVARIANT|static_assert|_Static_assert|assert)$/
}

# A new mutant of RULE at line SITE replacing lines A..B (by copies of
# them, which medit changes).
function mnew(rule, site, a, b,   j) {
  M++
  MR[M] = rule; MS[M] = site; MA[M] = a; MB[M] = b; MNL[M] = b - a + 1; MNOTE[M] = "-"
  for (j = a; j <= b; j++) NL[M, j - a + 1] = L[j]
}

# Replace LEN characters at column COL of line LINE of the current mutant.
function medit(line, col, len, txt,   k) {
  k = line - MA[M] + 1
  NL[M, k] = substr(NL[M, k], 1, col - 1) txt substr(NL[M, k], col + len)
}

# The call whose argument list holds column POS of line I: sets CK_NAME (the
# called name, "" if none), CK_ARG (which argument, from 0), CK_LINE and
# CK_COL (where its `(` is). Looks back at most 6 lines.
function call_at(i, pos,   li, s, j, c, depth, commas, pre) {
  CK_NAME = ""; depth = 0; commas = 0
  for (li = i; li >= 1 && li > i - 6; li--) {
    if (PP[li]) return
    s = C[li]
    j = (li == i) ? pos - 1 : length(s)
    for (; j >= 1; j--) {
      c = substr(s, j, 1)
      if (c == ")") depth++
      else if (c == "(") {
        if (depth == 0) {
          pre = substr(s, 1, j - 1)
          sub(/[ \t]+$/, "", pre)
          if (match(pre, /[A-Za-z_][A-Za-z0-9_]*$/)) CK_NAME = substr(pre, RSTART)
          CK_ARG = commas; CK_LINE = li; CK_COL = j
          return
        }
        depth--
      } else if (depth == 0 && c == ",") commas++
      else if (depth == 0 && (c == ";" || c == "{" || c == "}")) return
    }
  }
}

function order_kind(name, arg) {
  if (name ~ /^(sh_atomic_load|atomic_load_explicit)$/) return "load"
  if (name ~ /^(sh_atomic_store|atomic_store_explicit)$/) return "store"
  if (name ~ /^(sh_atomic_exchange|sh_atomic_fetch_[a-z]+|atomic_exchange_explicit)$/) return "rmw"
  if (name ~ /^(atomic_fetch_[a-z]+_explicit|atomic_thread_fence)$/) return "rmw"
  if (name ~ /^(sh_atomic_cas|sh_atomic_cas_weak|atomic_compare_exchange_(strong|weak)_explicit)$/)
    return arg == 3 ? "casok" : (arg == 4 ? "casfail" : "")
  return ""
}

# The orders one step weaker than MO for an operation of KIND, blank-separated.
function weaker(kind, mo) {
  if (kind == "load" || kind == "casfail") {
    if (mo == "seq_cst") return "acquire"
    if (mo == "acquire" || mo == "consume") return "relaxed"
  } else if (kind == "store") {
    if (mo == "seq_cst") return "release"
    if (mo == "release") return "relaxed"
  } else if (kind == "rmw" || kind == "casok") {
    if (mo == "seq_cst") return "acq_rel"
    if (mo == "acq_rel") return "acquire release"
    if (mo == "acquire" || mo == "release") return "relaxed"
  }
  return ""
}

function acquires(mo) {
  return mo != "relaxed" && mo != "release"
}

function rule_order(i,   s, off, pos, len, mo, kind, alts, na, k, fl, fc, fmo, nf) {
  s = C[i]
  off = 0
  while (match(substr(s, off + 1), /memory_order_[a-z_]+/)) {
    pos = off + RSTART; len = RLENGTH; off = pos + len - 1
    if (pos >= assert_col(i)) break
    mo = substr(s, pos + 13, len - 13)
    call_at(i, pos)
    kind = order_kind(CK_NAME, CK_ARG)
    na = split(weaker(kind, mo), alts, " ")
    for (k = 1; k <= na; k++) {
      fl = 0
      if (kind == "casok" && next_order(i, pos + len)) {
        fl = NO_LINE; fc = NO_COL; fmo = NO_MO
        nf = fmo
        if (fmo == "seq_cst" && alts[k] != "seq_cst") nf = "acquire"
        if (alts[k] == "relaxed") nf = "relaxed"
        if (nf == fmo) fl = 0
      }
      mnew("order", i, i, fl ? fl : i)
      if (kind == "store" || CK_NAME !~ /^sh_/ || (kind != "load" && acquires(mo) == acquires(alts[k])))
        MNOTE[M] = "blind"
      if (fl) medit(fl, fc + 13, length(fmo), nf)
      medit(i, pos + 13, len - 13, alts[k])
    }
  }
}

# The next memory_order_ token from column POS of line I, within 3 lines:
# NO_LINE, NO_COL, NO_MO.
function next_order(i, pos,   li, s, p) {
  for (li = i; li <= N && li <= i + 3; li++) {
    s = (li == i) ? substr(C[li], pos) : C[li]
    p = (li == i) ? pos - 1 : 0
    if (match(s, /memory_order_[a-z_]+/)) {
      NO_LINE = li; NO_COL = p + RSTART; NO_MO = substr(s, RSTART + 13, RLENGTH - 13)
      return 1
    }
  }
  return 0
}

# From the `(` at column COL of line I: its matching `)` (CL_LINE, CL_COL)
# within 6 lines, and the arguments' text (ARGV_[1..ARGN], from the masked
# code). 0 if not found.
function close_paren(i, col,   li, s, j, c, depth, arg) {
  depth = 0; ARGN = 0; arg = ""
  for (li = i; li <= N && li < i + 6; li++) {
    s = C[li]
    for (j = (li == i) ? col + 1 : 1; j <= length(s); j++) {
      c = substr(s, j, 1)
      if (c == "(") depth++
      else if (c == ")") {
        if (depth == 0) {
          ARGV_[++ARGN] = trim(arg); CL_LINE = li; CL_COL = j
          return 1
        }
        depth--
      } else if (c == "," && depth == 0) {
        ARGV_[++ARGN] = trim(arg); arg = ""; continue
      }
      arg = arg c
    }
    arg = arg " "
  }
  return 0
}

function rule_cas(i,   s, off, pos, len, name, open, ld, st, e, rest) {
  s = C[i]
  off = 0
  while (match(substr(s, off + 1), /(sh_atomic_cas_weak|sh_atomic_cas|atomic_compare_exchange_(strong|weak)_explicit)[ \t]*\(/)) {
    pos = off + RSTART; len = RLENGTH; off = pos + len - 1
    if (pos >= assert_col(i)) break
    if (pos > 1 && substr(s, pos - 1, 1) ~ /[A-Za-z0-9_]/) continue
    name = substr(s, pos, len - 1)
    sub(/[ \t]+$/, "", name)
    open = pos + len - 1
    if (!close_paren(i, open) || ARGN != 5) continue
    if (name ~ /^sh_/) { ld = "sh_atomic_load"; st = "sh_atomic_store" }
    else { ld = "atomic_load_explicit"; st = "atomic_store_explicit" }
    e = "__extension__({ __auto_type mg_p_ = (" ARGV_[1] "); __auto_type mg_e_ = (" ARGV_[2] ");"
    e = e " __auto_type mg_v_ = " ld "(mg_p_, memory_order_seq_cst);"
    e = e " _Bool mg_ok_ = mg_v_ == *mg_e_; /* mutagen: a load and a store, not a CAS */"
    e = e " if (mg_ok_) " st "(mg_p_, (" ARGV_[3] "), memory_order_seq_cst); else *mg_e_ = mg_v_;"
    e = e " mg_ok_; })"
    rest = substr(L[CL_LINE], CL_COL + 1)
    mnew("cas", i, i, CL_LINE)
    MNL[M] = 1
    if (name !~ /^sh_/) MNOTE[M] = "blind"
    NL[M, 1] = substr(L[i], 1, pos - 1) e rest
  }
}

function rule_recheck(i,   j, t, kw, s, p, ok) {
  if (!START[i] || HEAD[i] != "SH_YIELD") return
  for (j = i + 1; j <= N; j++) {
    if (PP[j] || trim(C[j]) == "") continue
    if (START[j] && is_assert(HEAD[j])) continue
    if (!START[j] && is_assert(HEAD[j])) continue
    break
  }
  if (j > N || !START[j]) return
  t = trim(C[j])
  s = C[j]
  if (HEAD[j] == "if" || HEAD[j] == "while" || t ~ /^}[ \t]*while[ \t]*\(/) {
    p = index(s, "(")
    if (!close_paren(j, p)) return
    mnew("recheck", j, j, CL_LINE)
    medit(CL_LINE, CL_COL, 0, ")")
    medit(j, p + 1, 0, "0 && (")
    return
  }
  ok = FNHEAD[j] ~ /(^|[^A-Za-z0-9_])bool[ \t*]/
  if (HEAD[j] == "return" && ok && t ~ /\(.*;$/ && PDEND[j] == 0) {
    p = index(s, "return") + 7
    mnew("recheck", j, j, j)
    medit(j, length(s), 0, ")")
    medit(j, p, 0, "0 && (")
  }
}

function rule_cmp(i,   s, j, c, p, nx, lim) {
  s = C[i]
  lim = assert_col(i) - 1
  for (j = 1; j <= lim; j++) {
    c = substr(s, j, 1)
    if (c != "<" && c != ">") continue
    p = substr(s, j - 1, 1)
    nx = substr(s, j + 1, 1)
    if (c == ">" && p == "-") continue
    if (nx == c) { j++; continue }
    if (p == c) continue
    mnew("cmp", i, i, i)
    if (nx == "=") { medit(i, j, 2, c); j++ } else medit(i, j, 1, c "=")
  }
}

function rule_del(i,   t, w) {
  if (!START[i] || PDEND[i] != 0 || BRACES[i]) return
  t = trim(C[i])
  if (t !~ /;$/ || t ~ /^\(/) return
  w = HEAD[i]
  if (w ~ /^(if|while|for|do|switch|else|case|default|break|continue|goto)$/) return
  if (w ~ /^(SH_YIELD|SH_FROM_USER|SH_MEM_FRESH|SH_TRACE[A-Z_]*|sh_fault[a-z_]*)$/) return
  if (is_assert(w)) return
  if (w == "return" && t != "return;") return
  if (t ~ /^((static|const|volatile|struct|enum|union|unsigned|signed|_Atomic|register|extern)[ \t]+)*[A-Za-z_][A-Za-z0-9_]*[ \t*]+(const[ \t]+)?[A-Za-z_][A-Za-z0-9_]*[ \t]*(\[[^\]]*\][ \t]*)*(=|;|,)/)
    return
  mnew("del", i, i, i)
  MNL[M] = 0
}

function summary(k, which,   j, s, n) {
  s = ""
  n = which == "old" ? MB[k] - MA[k] + 1 : MNL[k]
  for (j = 1; j <= n; j++)
    s = s (j > 1 ? " " : "") trim(which == "old" ? L[MA[k] + j - 1] : NL[k, j])
  if (s == "") s = "(deleted)"
  gsub(/\t/, " ", s)
  return s
}

function write_patch(k, name, f,   a, b, cs, ce, oldn, newn, j) {
  a = MA[k]; b = MB[k]
  cs = a - 3; if (cs < 1) cs = 1
  ce = b + 3; if (ce > N) ce = N
  oldn = ce - cs + 1
  newn = oldn - (b - a + 1) + MNL[k]
  print "Mechanical mutant " name " (" MR[k] ") at " path ":" MS[k] "." > f
  print "" > f
  print "diff --git a/" path " b/" path > f
  print "--- a/" path > f
  print "+++ b/" path > f
  print "@@ -" cs "," oldn " +" cs "," newn " @@" > f
  for (j = cs; j < a; j++) print " " L[j] > f
  for (j = a; j <= b; j++) print "-" L[j] > f
  for (j = 1; j <= MNL[k]; j++) print "+" NL[k, j] > f
  for (j = b + 1; j <= ce; j++) print " " L[j] > f
  close(f)
}

function emit_all(   k, base, n, seen, name) {
  for (k = 1; k <= M; k++) n[MR[k] "-" stem "-" MS[k]]++
  for (k = 1; k <= M; k++) {
    base = MR[k] "-" stem "-" MS[k]
    name = base
    if (n[base] > 1) name = base "-" (++seen[base])
    write_patch(k, name, out "/" name ".patch")
    print name "\t" MR[k] "\t" path ":" MS[k] "\t" summary(k, "old") "\t" summary(k, "new") "\t" MNOTE[k]
  }
}
