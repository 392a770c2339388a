# conformance-summary.awk: summarises the output of a Go test binary run with
# -test.v: counts the results of the leaf tests (tests without subtests),
# lists every failed and skipped leaf with the first lines it logged (the
# reason), and a parent that failed or skipped without any subtest result.
# Usage: awk -f conformance-summary.awk OUTPUT
# Exit status: 0 when there is no failure and at least one result, 1 otherwise.

function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }

# Lines a test logged: "    file_test.go:12: message" under "=== RUN|CONT|NAME|PAUSE name".
/^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; next }

/^[ \t]*--- (PASS|FAIL|SKIP): / {
	line = trim($0)
	split(line, f, " ")
	st = f[2]; sub(/:$/, "", st)
	name = f[3]
	status[name] = st
	order[++n] = name
	count[st]++
	cur = name
	next
}

/^[ \t]+[^ \t]/ && cur != "" {
	if (nlog[cur] < 3) log_[cur, ++nlog[cur]] = trim($0)
	next
}

function reason(name,   i, s) {
	s = ""
	for (i = 1; i <= nlog[name]; i++) s = s (i > 1 ? " | " : "") log_[name, i]
	return s == "" ? "(no message)" : s
}

END {
	for (i = 1; i <= n; i++) {
		p = order[i]
		while (sub(/\/[^\/]*$/, "", p)) parent[p] = 1
	}
	for (i = 1; i <= n; i++)
		if (!parent[order[i]]) leaves[status[order[i]]]++
	printf "conformance summary: %d passed, %d failed, %d skipped (tests without subtests)\n", leaves["PASS"] + 0, leaves["FAIL"] + 0, leaves["SKIP"] + 0
	for (k = 1; k <= 2; k++) {
		want = k == 1 ? "FAIL" : "SKIP"
		for (i = 1; i <= n; i++)
			if (status[order[i]] == want && !parent[order[i]]) printf "  %s %s: %s\n", want, order[i], reason(order[i])
	}
	exit (count["FAIL"] > 0 || n == 0) ? 1 : 0
}
