# jsonflat.awk — print every scalar of a JSON document as "path<TAB>value".
#
#   awk -f jsonflat.awk fio.json | grep '^jobs/0/write/bw	'
#
# Paths join object keys and array indexes with "/":
#   {"jobs":[{"write":{"bw":123}}]}  ->  jobs/0/write/bw<TAB>123
# Strings are printed without their quotes, escapes left as they are.
# Anything before the first "{" or "[" is skipped (fio may print notes to the
# same file).  Enough for fio's --output-format=json so that bench/run needs
# neither jq nor python; works with mawk and gawk.  On malformed input it
# prints "jsonflat: parse error at offset N" to stderr and exits 1.

BEGIN { RS = "\001"; doc = "" }
{ doc = doc $0 "\n" }
END {
	n = length(doc)
	pos = 1
	while (pos <= n && substr(doc, pos, 1) != "{" && substr(doc, pos, 1) != "[")
		pos++
	if (pos > n)
		fail()
	value("")
	exit bad
}

function fail() {
	if (!bad)
		printf("jsonflat: parse error at offset %d\n", pos) > "/dev/stderr"
	bad = 1
	pos = n + 1
}

function ws(   c) {
	while (pos <= n) {
		c = substr(doc, pos, 1)
		if (c != " " && c != "\t" && c != "\n" && c != "\r")
			return
		pos++
	}
}

function join(path, k) {
	return path == "" ? k : path "/" k
}

# A string starting at pos (on the quote); returns its body.
function str(   out, c, chunk) {
	out = ""
	pos++
	while (pos <= n) {
		chunk = substr(doc, pos, 256)
		if (match(chunk, /^[^"\\]+/)) {
			out = out substr(chunk, 1, RLENGTH)
			pos += RLENGTH
			continue
		}
		c = substr(doc, pos, 1)
		if (c == "\\") {
			out = out substr(doc, pos, 2)
			pos += 2
			continue
		}
		pos++		# the closing quote
		return out
	}
	fail()
	return out
}

function value(path,   c, k, i, chunk) {
	ws()
	if (pos > n) {
		fail()
		return
	}
	c = substr(doc, pos, 1)
	if (c == "{") {
		pos++
		ws()
		if (substr(doc, pos, 1) == "}") {
			pos++
			return
		}
		while (pos <= n) {
			ws()
			if (substr(doc, pos, 1) != "\"") {
				fail()
				return
			}
			k = str()
			ws()
			if (substr(doc, pos, 1) != ":") {
				fail()
				return
			}
			pos++
			value(join(path, k))
			ws()
			c = substr(doc, pos, 1)
			pos++
			if (c == "}")
				return
			if (c != ",") {
				fail()
				return
			}
		}
		return
	}
	if (c == "[") {
		pos++
		ws()
		if (substr(doc, pos, 1) == "]") {
			pos++
			return
		}
		for (i = 0; pos <= n; i++) {
			value(join(path, i))
			ws()
			c = substr(doc, pos, 1)
			pos++
			if (c == "]")
				return
			if (c != ",") {
				fail()
				return
			}
		}
		return
	}
	if (c == "\"") {
		print path "\t" str()
		return
	}
	chunk = substr(doc, pos, 64)
	if (match(chunk, /^(-?[0-9][-+0-9.eE]*|true|false|null)/)) {
		print path "\t" substr(chunk, 1, RLENGTH)
		pos += RLENGTH
		return
	}
	fail()
}
