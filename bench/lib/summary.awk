# summary.awk — the tables of summary.md, from stats.csv.
#   awk -F, -v have_vfs=0|1 -f summary.awk stats.csv
# stats.csv: family,config,fs,test,jobs,metric,unit,n,median,min,max
#
# Headline: ratios of medians.  Targets (DESIGN.md section 6, the issues):
#   versionfs/passthrough >= 0.95 sequential write and read (fio seqwrite,
#   seqread), >= 0.80 4 KiB random write (randwrite); versionfs with a
#   checkpoint every second / versionfs >= 0.97 on every fio test.
# PASS/FAIL per target, n.a. when a side has no number.

NR == 1 { next }
{
	k = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4 SUBSEP $5 SUBSEP $6
	med[k] = $9; lo[k] = $10; hi[k] = $11; cnt[k] = $8; unit[k] = $7
	if (!($3 in fsseen)) { fsseen[$3] = 1; fsorder[++nfs] = $3 }
	have[$1, $2] = 1
}

function get(fam, cfg, fs, test, jobs, metric,   k) {
	k = fam SUBSEP cfg SUBSEP fs SUBSEP test SUBSEP jobs SUBSEP metric
	return (k in med) ? med[k] : ""
}

function cell(fam, cfg, fs, test, jobs, metric,   k) {
	k = fam SUBSEP cfg SUBSEP fs SUBSEP test SUBSEP jobs SUBSEP metric
	if (!(k in med))
		return "–"
	if (cnt[k] > 1)
		return sprintf("%s [%s–%s]", fmt(med[k]), fmt(lo[k]), fmt(hi[k]))
	return fmt(med[k])
}

function fmt(v) {
	if (v >= 100) return sprintf("%.0f", v)
	if (v >= 10) return sprintf("%.1f", v)
	return sprintf("%.2f", v)
}

function ratio(a, b) {
	if (a == "" || b == "" || b + 0 == 0) return ""
	return a / b
}

function rcell(r) {
	return r == "" ? "–" : sprintf("%.2f", r)
}

function target(r, t) {
	if (r == "") { nna++; return sprintf("≥%.2f n.a.", t) }
	if (r + 0 >= t) { npass++; return sprintf("≥%.2f **PASS**", t) }
	nfail++
	return sprintf("≥%.2f **FAIL**", t)
}

END {
	ntests = split("seqwrite seqread randwrite randread", tests, " ")
	tgt["seqwrite"] = 0.95; tgt["seqread"] = 0.95; tgt["randwrite"] = 0.80
	ck = "versionfs-ckpt1s"

	print "## Headline: ratios of medians (fio bandwidth)"
	print ""
	if (!have_vfs)
		print "versionfs was not built when this ran: its columns are n.a.\n"
	print "| fs | test | jobs | passthrough / native | versionfs / native | versionfs / passthrough | target | versionfs+ckpt 1 s / versionfs | target |"
	print "|---|---|---|---|---|---|---|---|---|"
	for (f = 1; f <= nfs; f++) {
		fs = fsorder[f]
		for (t = 1; t <= ntests; t++) {
			test = tests[t]
			for (j = 1; j <= 2; j++) {
				nat = get("fio", "native", fs, test, j, "bw")
				pt = get("fio", "passthrough", fs, test, j, "bw")
				vf = get("fio", "versionfs", fs, test, j, "bw")
				vc = get("fio", ck, fs, test, j, "bw")
				if (nat == "" && pt == "" && vf == "") continue
				r1 = ratio(pt, nat); r2 = ratio(vf, nat); r3 = ratio(vf, pt); r4 = ratio(vc, vf)
				t3 = (test in tgt) ? target(r3, tgt[test]) : "–"
				t4 = target(r4, 0.97)
				printf "| %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", fs, test, j,
				    rcell(r1), rcell(r2), rcell(r3), t3, rcell(r4), t4
			}
		}
	}
	print ""
	printf "Targets: %d PASS, %d FAIL, %d n.a.\n", npass, nfail, nna
	print ""

	print "## fio: bandwidth, MiB/s (median [min–max] over the repetitions)"
	print ""
	print "| fs | test | jobs | native | passthrough | versionfs | versionfs+ckpt 1 s |"
	print "|---|---|---|---|---|---|---|"
	for (f = 1; f <= nfs; f++) {
		fs = fsorder[f]
		for (t = 1; t <= ntests; t++)
			for (j = 1; j <= 2; j++) {
				test = tests[t]
				if (get("fio", "native", fs, test, j, "bw") == "" && get("fio", "passthrough", fs, test, j, "bw") == "") continue
				printf "| %s | %s | %d | %s | %s | %s | %s |\n", fs, test, j,
				    cell("fio", "native", fs, test, j, "bw"), cell("fio", "passthrough", fs, test, j, "bw"),
				    cell("fio", "versionfs", fs, test, j, "bw"), cell("fio", ck, fs, test, j, "bw")
			}
	}
	print ""
	print "Mean latency per I/O, µs (median):"
	print ""
	print "| fs | test | jobs | native | passthrough | versionfs | versionfs+ckpt 1 s |"
	print "|---|---|---|---|---|---|---|"
	for (f = 1; f <= nfs; f++) {
		fs = fsorder[f]
		for (t = 1; t <= ntests; t++)
			for (j = 1; j <= 2; j++) {
				test = tests[t]
				if (get("fio", "native", fs, test, j, "lat_mean") == "" && get("fio", "passthrough", fs, test, j, "lat_mean") == "") continue
				printf "| %s | %s | %d | %s | %s | %s | %s |\n", fs, test, j,
				    fmtl(get("fio", "native", fs, test, j, "lat_mean")), fmtl(get("fio", "passthrough", fs, test, j, "lat_mean")),
				    fmtl(get("fio", "versionfs", fs, test, j, "lat_mean")), fmtl(get("fio", ck, fs, test, j, "lat_mean"))
			}
	}
	print ""

	nmd = split("create stat stat_cold unlink", mdt, " ")
	print "## Metadata (mdtest): operations/s, one directory"
	print ""
	print "| fs | operation | native | passthrough | versionfs | versionfs+ckpt 1 s | passthrough / native | versionfs / passthrough | ckpt / versionfs |"
	print "|---|---|---|---|---|---|---|---|---|"
	for (f = 1; f <= nfs; f++) {
		fs = fsorder[f]
		for (t = 1; t <= nmd; t++) {
			test = mdt[t]
			nat = get("mdtest", "native", fs, test, 1, "ops")
			pt = get("mdtest", "passthrough", fs, test, 1, "ops")
			vf = get("mdtest", "versionfs", fs, test, 1, "ops")
			vc = get("mdtest", ck, fs, test, 1, "ops")
			if (nat == "" && pt == "" && vf == "") continue
			printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", fs, test,
			    cell("mdtest", "native", fs, test, 1, "ops"), cell("mdtest", "passthrough", fs, test, 1, "ops"),
			    cell("mdtest", "versionfs", fs, test, 1, "ops"), cell("mdtest", ck, fs, test, 1, "ops"),
			    rcell(ratio(pt, nat)), rcell(ratio(vf, pt)), rcell(ratio(vc, vf))
		}
	}
	print ""

	nbt = split("putc put_block rewrite getc get_block seeks seq_create seq_stat seq_delete ran_create ran_stat ran_delete", bt, " ")
	nbc = split("native passthrough versionfs versionfs-ckpt300s versionfs-ckpt60s versionfs-ckpt10s versionfs-ckpt1s", bc, " ")
	print "## Bonnie++ (the versioning paper's section 4.1): median"
	print ""
	print "Throughput in MiB/s for putc..get_block, operations/s for the rest; "
	print "\"–\": no number (bonnie++ prints +++++ when a step takes < 500 ms)."
	print "Ratios: each checkpoint period against versionfs without checkpoints (∞)."
	print ""
	hdr = "| fs | step |"; sep = "|---|---|"
	for (c = 1; c <= nbc; c++) {
		if (!have["bonnie", bc[c]]) continue
		name = bc[c]; sub(/^versionfs-ckpt/, "ckpt ", name); if (name == "versionfs") name = "versionfs ∞"
		hdr = hdr " " name " |"; sep = sep "---|"
	}
	for (c = 1; c <= nbc; c++)
		if (have["bonnie", bc[c]] && bc[c] ~ /ckpt/) {
			name = bc[c]; sub(/^versionfs-ckpt/, "", name)
			hdr = hdr " " name "/∞ |"; sep = sep "---|"
		}
	print hdr
	print sep
	for (f = 1; f <= nfs; f++) {
		fs = fsorder[f]
		for (t = 1; t <= nbt; t++) {
			test = bt[t]
			line = "| " fs " | " test " |"; any = 0
			for (c = 1; c <= nbc; c++) {
				if (!have["bonnie", bc[c]]) continue
				v = get("bonnie", bc[c], fs, test, 1, "throughput")
				if (v != "") any = 1
				line = line " " (v == "" ? "–" : fmt(v)) " |"
			}
			inf = get("bonnie", "versionfs", fs, test, 1, "throughput")
			for (c = 1; c <= nbc; c++)
				if (have["bonnie", bc[c]] && bc[c] ~ /ckpt/)
					line = line " " rcell(ratio(get("bonnie", bc[c], fs, test, 1, "throughput"), inf)) " |"
			if (any) print line
		}
	}
	print ""

	print "## Checkpoint latency (versionfs-ctl checkpoint, wall clock, ms)"
	print ""
	nck = 0
	for (k in med) {
		split(k, p, SUBSEP)
		if (p[1] == "ckpt") nck++
	}
	if (nck == 0) {
		print "n.a. (versionfs was not measured)"
		print ""
		exit
	}
	print "| fs | measurement | config | median [min–max] | n |"
	print "|---|---|---|---|---|"
	n = 0
	for (k in med) {
		split(k, p, SUBSEP)
		if (p[1] != "ckpt" || (p[6] != "latency" && p[6] != "latency_median")) continue
		rows[++n] = p[3] SUBSEP p[4] SUBSEP p[2] SUBSEP k
	}
	for (a = 2; a <= n; a++) {
		x = rows[a]
		for (b = a - 1; b >= 1 && rows[b] > x; b--) rows[b + 1] = rows[b]
		rows[b + 1] = x
	}
	for (a = 1; a <= n; a++) {
		split(rows[a], p, SUBSEP)
		k = p[4] SUBSEP p[5] SUBSEP p[6] SUBSEP p[7] SUBSEP p[8] SUBSEP p[9]
		printf "| %s | %s | %s | %s [%s–%s] | %d |\n", p[1], p[2], p[3], fmt(med[k]), fmt(lo[k]), fmt(hi[k]), cnt[k]
	}
	print ""
	print "\"dirtyD-of-N\": D files rewritten among N, then one checkpoint; \"first-N\": the"
	print "first checkpoint after creating N files; \"clean-N\": nothing changed;"
	print "\"loop-FAMILY\": median latency of the once-a-second checkpoints taken"
	print "while that benchmark ran (counts and failures are in ckpt.csv)."
}

function fmtl(v) {
	return v == "" ? "–" : fmt(v)
}
