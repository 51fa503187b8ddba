# summary.awk — the tables of summary.md, from stats.csv.
#   awk -F, -v have_vfs=0|1 -f summary.awk stats.csv
# stats.csv: family,config,fs,test,jobs,metric,unit,n,median,min,max
#
# Headline: ratios of medians.  Targets (DESIGN.md section 6, the issues):
#   versionfs/passthrough >= 0.95 sequential write and read (fio seqwrite,
#   seqread), >= 0.80 4 KiB random write (randwrite); versionfs with a
#   checkpoint every second (the core issue) and every 10 s (issue 6) /
#   versionfs >= 0.97 on every fio test.  native+sync 1 s / native (a
#   syncfs every second: durability without versions) is the reference
#   for what making the writes durable costs at all.
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
	ck = "versionfs-ckpt1s"; ck10 = "versionfs-ckpt10s"; ns = "native-sync1s"

	print "## Headline: ratios of medians (fio bandwidth)"
	print ""
	if (!have_vfs)
		print "versionfs was not built when this ran: its columns are n.a.\n"
	print "| fs | test | jobs | passthrough / native | versionfs / native | versionfs / passthrough | target | versionfs+ckpt 1 s / versionfs | target | versionfs+ckpt 10 s / versionfs | target | native+sync 1 s / native |"
	print "|---|---|---|---|---|---|---|---|---|---|---|---|"
	for (f = 1; f <= nfs; f++) {
		fs = fsorder[f]
		for (t = 1; t <= ntests; t++) {
			test = tests[t]
			for (j = 1; j <= 2; j++) {
				nat = get("fio", "native", fs, test, j, "bw")
				pt = get("fio", "passthrough", fs, test, j, "bw")
				vf = get("fio", "versionfs", fs, test, j, "bw")
				vc = get("fio", ck, fs, test, j, "bw")
				v10 = get("fio", ck10, fs, test, j, "bw")
				nsy = get("fio", ns, fs, test, j, "bw")
				if (nat == "" && pt == "" && vf == "") continue
				r1 = ratio(pt, nat); r2 = ratio(vf, nat); r3 = ratio(vf, pt); r4 = ratio(vc, vf)
				r5 = ratio(v10, vf); r6 = ratio(nsy, nat)
				t3 = (test in tgt) ? target(r3, tgt[test]) : "–"
				t4 = target(r4, 0.97)
				t5 = have["fio", ck10] ? target(r5, 0.97) : "–"
				printf "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", fs, test, j,
				    rcell(r1), rcell(r2), rcell(r3), t3, rcell(r4), t4, rcell(r5), t5, rcell(r6)
			}
		}
	}
	print ""
	printf "Targets: %d PASS, %d FAIL, %d n.a.\n", npass, nfail, nna
	print ""

	# The versioned layout's floor (native-freshPs, full mode): random
	# writes into a fresh sparse file per period, synced at its end.
	if (have["fio", "native-fresh1s"] || have["fio", "native-fresh10s"]) {
		print "## Random writes under checkpoints, against the versioned layout's floor"
		print ""
		print "A checkpoint every P s sends each epoch's first write of a page to a new"
		print "sparse content file, which the checkpoint must get to the disk. The floor"
		print "(native-fresh P s) does just that on the native file system: the randwrite"
		print "job's writes, one fresh sparse file per period, each period ended by an"
		print "fsync. native+sync overwrites in place: no allocation, the wrong reference"
		print "for a copy-on-write layout. Bandwidth, MiB/s (median)."
		print ""
		print "| fs | jobs | period | native | native+sync | floor (native-fresh) | versionfs | versionfs+ckpt | floor / native | versionfs+ckpt / floor | versionfs+ckpt / versionfs |"
		print "|---|---|---|---|---|---|---|---|---|---|---|"
		np = split("1 10", per, " ")
		for (f = 1; f <= nfs; f++) {
			fs = fsorder[f]
			for (j = 1; j <= 2; j++)
				for (q = 1; q <= np; q++) {
					fl = get("fio", "native-fresh" per[q] "s", fs, "randwrite", j, "bw")
					if (fl == "") continue
					nat = get("fio", "native", fs, "randwrite", j, "bw")
					vf = get("fio", "versionfs", fs, "randwrite", j, "bw")
					vc = get("fio", "versionfs-ckpt" per[q] "s", fs, "randwrite", j, "bw")
					printf "| %s | %d | %s s | %s | %s | %s | %s | %s | %s | %s | %s |\n", fs, j, per[q],
					    cell("fio", "native", fs, "randwrite", j, "bw"),
					    per[q] == 1 ? cell("fio", ns, fs, "randwrite", j, "bw") : "–",
					    cell("fio", "native-fresh" per[q] "s", fs, "randwrite", j, "bw"),
					    cell("fio", "versionfs", fs, "randwrite", j, "bw"),
					    cell("fio", "versionfs-ckpt" per[q] "s", fs, "randwrite", j, "bw"),
					    rcell(ratio(fl, nat)), rcell(ratio(vc, fl)), rcell(ratio(vc, vf))
				}
		}
		print ""
	}

	print "## fio: bandwidth, MiB/s (median [min–max] over the repetitions)"
	print ""
	print "| fs | test | jobs | native | native+sync 1 s | passthrough | versionfs | versionfs+ckpt 1 s | versionfs+ckpt 10 s |"
	print "|---|---|---|---|---|---|---|---|---|"
	for (f = 1; f <= nfs; f++) {
		fs = fsorder[f]
		for (t = 1; t <= ntests; t++)
			for (j = 1; j <= 2; j++) {
				test = tests[t]
				if (get("fio", "native", fs, test, j, "bw") == "" && get("fio", "passthrough", fs, test, j, "bw") == "" && get("fio", "versionfs", fs, test, j, "bw") == "") continue
				printf "| %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", fs, test, j,
				    cell("fio", "native", fs, test, j, "bw"), cell("fio", ns, fs, test, j, "bw"),
				    cell("fio", "passthrough", fs, test, j, "bw"),
				    cell("fio", "versionfs", fs, test, j, "bw"), cell("fio", ck, fs, test, j, "bw"),
				    cell("fio", ck10, fs, test, j, "bw")
			}
	}
	print ""
	print "Mean latency per I/O, µs (median):"
	print ""
	print "| fs | test | jobs | native | native+sync 1 s | passthrough | versionfs | versionfs+ckpt 1 s | versionfs+ckpt 10 s |"
	print "|---|---|---|---|---|---|---|---|---|"
	for (f = 1; f <= nfs; f++) {
		fs = fsorder[f]
		for (t = 1; t <= ntests; t++)
			for (j = 1; j <= 2; j++) {
				test = tests[t]
				if (get("fio", "native", fs, test, j, "lat_mean") == "" && get("fio", "passthrough", fs, test, j, "lat_mean") == "" && get("fio", "versionfs", fs, test, j, "lat_mean") == "") continue
				printf "| %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", fs, test, j,
				    fmtl(get("fio", "native", fs, test, j, "lat_mean")), fmtl(get("fio", ns, fs, test, j, "lat_mean")),
				    fmtl(get("fio", "passthrough", fs, test, j, "lat_mean")),
				    fmtl(get("fio", "versionfs", fs, test, j, "lat_mean")), fmtl(get("fio", ck, fs, test, j, "lat_mean")),
				    fmtl(get("fio", ck10, fs, test, j, "lat_mean"))
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

	ckpt_section()
	scale_section()
	clean_section()
}

function ckpt_section(   nck, k, p, n, rows, a, b, x, key, fs, test, cfg) {
	print "## Checkpoint latency (ms)"
	print ""
	nck = 0
	for (k in med) {
		split(k, p, SUBSEP)
		if (p[1] == "ckpt") nck++
	}
	if (nck == 0) {
		print "n.a. (versionfs was not measured)"
		print ""
		return
	}
	print "| fs | measurement | config | latency, median [min–max] | n | blocked | syncing | saving | open files | command |"
	print "|---|---|---|---|---|---|---|---|---|---|"
	n = 0
	for (k in med) {
		split(k, p, SUBSEP)
		if (p[1] != "ckpt" || (p[6] != "latency" && p[6] != "latency_median")) continue
		rows[++n] = p[3] SUBSEP p[4] SUBSEP p[2] SUBSEP p[5] SUBSEP p[6]
	}
	for (a = 2; a <= n; a++) {
		x = rows[a]
		for (b = a - 1; b >= 1 && rows[b] > x; b--) rows[b + 1] = rows[b]
		rows[b + 1] = x
	}
	for (a = 1; a <= n; a++) {
		split(rows[a], p, SUBSEP)
		fs = p[1]; test = p[2]; cfg = p[3]
		key = "ckpt" SUBSEP cfg SUBSEP fs SUBSEP test SUBSEP p[4] SUBSEP p[5]
		printf "| %s | %s | %s | %s [%s–%s] | %d | %s | %s | %s | %s | %s |\n", fs, test, cfg,
		    fmt(med[key]), fmt(lo[key]), fmt(hi[key]), cnt[key],
		    fmtl(get("ckpt", cfg, fs, test, 1, "window")), fmtl(get("ckpt", cfg, fs, test, 1, "sync")),
		    fmtl(get("ckpt", cfg, fs, test, 1, "prepare")), fmtl(get("ckpt", cfg, fs, test, 1, "barrier")),
		    fmtl(get("ckpt", cfg, fs, test, 1, "latency_cmd"))
	}
	print ""
	print "versionfs rows: one checkpoint through libversionfs (`vfs_checkpoint`: the"
	print "client's syncfs of the mount, the request, the answer once durable), timed"
	print "in the calling process; \"blocked\": the part during which operations on"
	print "the mount wait, \"syncing\": making it durable (syncfs of the store and the"
	print "index), \"saving\": persisting dirty files while the job runs, \"open"
	print "files\": fsyncing the files still open (the daemon's own account, medians);"
	print "\"command\": `versionfs-ctl checkpoint` timed from a shell (a process start"
	print "more). \"dirtyD-of-N\": D files rewritten among N, then one checkpoint;"
	print "\"first-N\": the first checkpoint after creating N files; \"clean-N\":"
	print "nothing changed; \"loop-FAMILY\": median latency of the periodic"
	print "checkpoints (native-sync: syncfs) taken while that benchmark ran (counts and"
	print "failures are in ckpt.csv). native rows: \"dirtyD-of-N\" the same rewrite on"
	print "the native file system and one syncfs, what making these changes durable"
	print "costs without versions; \"storefloorD-of-N\" D new 4 KiB files and D new"
	print "metadata files in the store's layout and one syncfs, the least the"
	print "versioned layout (a content and a metadata file per changed file and"
	print "checkpoint, versionfs(5)) costs on this device."
	print ""
}

function fmtn(v) {
	return v == "" ? "–" : sprintf("%d", v)
}

function fmtl(v) {
	return v == "" ? "–" : fmt(v)
}

# The numbers N of the tests PREFIX N SUFFIX of (fam, fs, metric), sorted,
# in out[1..n]; returns n.
function nums(fam, fs, prefix, suffix, metric, out,   k, p, n, v, seen, a, b, x) {
	n = 0
	for (k in med) {
		split(k, p, SUBSEP)
		if (p[1] != fam || p[3] != fs || p[6] != metric) continue
		if (p[4] !~ ("^" prefix "[0-9]+" suffix "$")) continue
		v = substr(p[4], length(prefix) + 1)
		v = substr(v, 1, length(v) - length(suffix)) + 0
		if (v in seen) continue
		seen[v] = 1
		out[++n] = v
	}
	for (a = 2; a <= n; a++) {
		x = out[a]
		for (b = a - 1; b >= 1 && out[b] > x; b--) out[b + 1] = out[b]
		out[b + 1] = x
	}
	return n
}

function has_family(fam,   k, p) {
	for (k in med) {
		split(k, p, SUBSEP)
		if (p[1] == fam) return 1
	}
	return 0
}

# A verdict against an upper bound (the scale and clean targets).
function target_le(v, t, unit) {
	if (v == "") { xna++; return sprintf("≤%s%s n.a.", t, unit) }
	if (v + 0 <= t) { xpass++; return sprintf("≤%s%s **PASS**", t, unit) }
	xfail++
	return sprintf("≤%s%s **FAIL**", t, unit)
}

function target_ge(v, t) {
	if (v == "") { xna++; return sprintf("≥%.2f n.a.", t) }
	if (v + 0 >= t) { xpass++; return sprintf("≥%.2f **PASS**", t) }
	xfail++
	return sprintf("≥%.2f **FAIL**", t)
}

function commas(n,   s) {
	s = sprintf("%d", n)
	while (s ~ /[0-9][0-9][0-9][0-9]/)
		sub(/[0-9][0-9][0-9]([,]|$)/, ",&", s)
	gsub(/,,/, ",", s)
	return s
}

function scale_section(   f, fs, n, i, N, v, lo1, hi1, r, any, ext, base, m, nm, o, ro, t, nat, flo) {
	print "## Scale (versionfs): targets of the core issue"
	print ""
	any = has_family("scale") || has_family("ckpt")
	if (!any) {
		print "n.a. (neither ckpt nor scale ran)"
		print ""
		return
	}
	xpass = xfail = xna = 0
	print "| fs | measurement | median | target |"
	print "|---|---|---|---|"
	for (f = 1; f <= nfs; f++) {
		fs = fsorder[f]
		n = nums("ckpt", fs, "dirty100-of-", "", "latency", N)
		for (i = 1; i <= n; i++) {
			v = get("ckpt", "versionfs", fs, "dirty100-of-" N[i], 1, "latency")
			printf "| %s | checkpoint, 100 dirty of %s files | %s ms | %s |\n", fs, commas(N[i]), fmtl(v), target_le(v, 5, " ms")
			nat = get("ckpt", "native", fs, "dirty100-of-" N[i], 1, "latency")
			flo = get("ckpt", "native", fs, "storefloor100-of-" N[i], 1, "latency")
			if (nat != "")
				printf "| %s | … / native rewrite + syncfs of the same files (%s ms) | %s | (reference) |\n", fs, fmtl(nat), rcell(ratio(v, nat))
			if (flo != "")
				printf "| %s | … / store floor: 200 new files + syncfs (%s ms) | %s | (reference) |\n", fs, fmtl(flo), rcell(ratio(v, flo))
		}
		if (n >= 2) {
			lo1 = get("ckpt", "versionfs", fs, "dirty100-of-" N[1], 1, "latency")
			hi1 = get("ckpt", "versionfs", fs, "dirty100-of-" N[n], 1, "latency")
			r = ratio(hi1, lo1)
			printf "| %s | flat: checkpoint at %s / at %s files | %s | %s |\n", fs, commas(N[n]), commas(N[1]), rcell(r), target_le(r == "" ? "" : sprintf("%.2f", r), "2.0", "")
		}
		if (nums("scale", fs, "rollback-", "", "latency", N) > 0) {
			v = get("scale", "versionfs", fs, "rollback-1000", 1, "latency")
			printf "| %s | rollback, 1,000 changed files | %s ms | %s |\n", fs, fmtl(v), target_le(v, 100, " ms")
		}
	}
	print ""
	printf "Targets: %d PASS, %d FAIL, %d n.a. (checkpoint rows come from the ckpt family, rollback from scale; \"flat\": the largest N at most twice the smallest).\n", xpass, xfail, xna
	print ""
	if (!has_family("scale"))
		return

	print "### Rollback latency against the files changed (versionfs-ctl rollback, wall clock, ms)"
	print ""
	print "| fs | files changed | median [min–max] | n | per changed file, µs |"
	print "|---|---|---|---|---|"
	for (f = 1; f <= nfs; f++) {
		fs = fsorder[f]
		n = nums("scale", fs, "rollback-", "", "latency", N)
		for (i = 1; i <= n; i++) {
			v = get("scale", "versionfs", fs, "rollback-" N[i], 1, "latency")
			printf "| %s | %s | %s | %d | %s |\n", fs, commas(N[i]), cell("scale", "versionfs", fs, "rollback-" N[i], 1, "latency"),
			    cnt["scale" SUBSEP "versionfs" SUBSEP fs SUBSEP "rollback-" N[i] SUBSEP 1 SUBSEP "latency"], fmt(v * 1000 / N[i])
		}
	}
	print ""
	print "Each: rewrite 4 KiB of that many files (among 10,000; quick: 1,000), sync,"
	print "roll back to the checkpoint taken before; a process start (~1 ms) included."
	print ""

	print "### First write after a checkpoint against the file's extent map (4 KiB pwrite + fsync, ms)"
	print ""
	print "| fs | extents (about) | first write [min–max] | second write | first / first on 1 extent |"
	print "|---|---|---|---|---|"
	for (f = 1; f <= nfs; f++) {
		fs = fsorder[f]
		n = nums("scale", fs, "write-ext", "", "first_write", N)
		base = get("scale", "versionfs", fs, "write-ext1", 1, "first_write")
		for (i = 1; i <= n; i++) {
			t = "write-ext" N[i]
			printf "| %s | %s | %s | %s | %s |\n", fs, commas(N[i]), cell("scale", "versionfs", fs, t, 1, "first_write"),
			    cell("scale", "versionfs", fs, t, 1, "second_write"), rcell(ratio(get("scale", "versionfs", fs, t, 1, "first_write"), base))
		}
	}
	print ""
	print "All files the same size; the first write of an epoch makes the daemon copy"
	print "the file's map (at the fsync), the second does not."
	print ""

	print "### Daemon memory (/proc/PID/status, MiB)"
	print ""
	print "| fs | reading | VmRSS | VmHWM | RssAnon | RssFile | descriptors |"
	print "|---|---|---|---|---|---|---|"
	for (f = 1; f <= nfs; f++) {
		fs = fsorder[f]
		n = nums("scale", fs, "open-", "", "VmRSS", N)
		nm = 0
		for (i = 1; i <= n; i++) ro[++nm] = "open-" N[i]
		ro[++nm] = "rss-mount"; ro[++nm] = "rss-extents-built"; ro[++nm] = "rss-extents-written"
		for (i = 1; i <= nm; i++) {
			t = ro[i]
			if (get("scale", "versionfs", fs, t, 1, "VmRSS") == "") continue
			m = t
			if (m ~ /^open-/) { sub(/^open-/, "", m); m = commas(m) " files open" }
			else if (m == "rss-mount") m = "extents: fresh mount"
			else if (m == "rss-extents-built") m = "extents: maps built"
			else if (m == "rss-extents-written") m = "extents: after the first writes"
			printf "| %s | %s | %s | %s | %s | %s | %s |\n", fs, m, fmtl(get("scale", "versionfs", fs, t, 1, "VmRSS")),
			    fmtl(get("scale", "versionfs", fs, t, 1, "VmHWM")), fmtl(get("scale", "versionfs", fs, t, 1, "RssAnon")),
			    fmtl(get("scale", "versionfs", fs, t, 1, "RssFile")), fmtn(get("scale", "versionfs", fs, t, 1, "fds"))
		}
		if (n >= 2) {
			v = ratio(get("scale", "versionfs", fs, "open-" N[n], 1, "RssAnon") - get("scale", "versionfs", fs, "open-" N[1], 1, "RssAnon"), N[n] - N[1])
			if (v != "")
				printf "| %s | per open file (RssAnon, %s to %s) | %.1f KiB | | | | |\n", fs, commas(N[1]), commas(N[n]), v * 1024
		}
	}
	print ""
	print "Open files: a fresh daemon, the caches dropped, N files opened read-write"
	print "with a byte read from each, read while they are open. RssFile includes the"
	print "pages of the LMDB index the daemon maps."
	print ""
}

function clean_section(   f, fs, n, i, P, t, c0, v, c1, c100, r, rn, ms, fr, a, b, ov) {
	if (!has_family("clean"))
		return
	print "## Cleaning (versionfs-ctl delete + cleaning pass): the cleaner issue"
	print ""
	xpass = xfail = xna = 0
	print "| fs | measurement | value | target |"
	print "|---|---|---|---|"
	for (f = 1; f <= nfs; f++) {
		fs = fsorder[f]
		c0 = get("clean", "versionfs", fs, "own-0pct", 1, "cost")
		c1 = get("clean", "versionfs", fs, "own-1pct", 1, "cost")
		c100 = get("clean", "versionfs", fs, "own-100pct", 1, "cost")
		a = get("clean", "versionfs", fs, "randwrite-idle", 1, "bw")
		b = get("clean", "versionfs", fs, "randwrite-cleaning", 1, "bw")
		if (c0 == "" && c1 == "" && c100 == "" && a == "" && b == "") continue
		r = ratio(c1, c100)
		# Judged only when 100 % costs clearly more than the fixed cost
		# of a pass (10 ms): below that the ratio divides noise by noise.
		if (c0 != "" && c1 != "" && c100 != "" && c100 - c0 >= 10)
			rn = sprintf("%.2f", (c1 - c0 < 0 ? 0 : c1 - c0) / (c100 - c0))
		else
			rn = ""
		printf "| %s | cost(1%%) / cost(100%%) | %s | ≈0.01 (reported) |\n", fs, rcell(r)
		if (rn == "" && c0 != "" && c100 != "") {
			xna++
			printf "| %s | the same, less the cost of an empty clean (0%%) | – | ≤0.10 n.a. (100%% costs %.1f ms more than 0%%: under 10 ms, nothing to scale) |\n", fs, c100 - c0
		} else
			printf "| %s | the same, less the cost of an empty clean (0%%) | %s | %s |\n", fs, rcell(rn), target_le(rn, "0.10", "")
		r = ratio(b, a)
		ov = get("clean", "versionfs", fs, "clean-during-fio", 1, "overlap")
		printf "| %s | fio randwrite during an online clean / without (clean covered %s of the run) | %s | %s |\n", fs,
		    ov == "" ? "?" : sprintf("%.0f%%", ov * 100), rcell(r), target_ge(r, 0.90)
	}
	print ""
	printf "Targets: %d PASS, %d FAIL, %d n.a.\n", xpass, xfail, xna
	print ""
	print "### Cost against what the deleted checkpoint owns"
	print ""
	print "| fs | owns | cost, ms [min–max] | cost − empty, ms | freed (du), MiB | freed (cleaner), MiB | unique (list), MiB |"
	print "|---|---|---|---|---|---|---|"
	for (f = 1; f <= nfs; f++) {
		fs = fsorder[f]
		n = nums("clean", fs, "own-", "pct", "cost", P)
		c0 = get("clean", "versionfs", fs, "own-0pct", 1, "cost")
		for (i = 1; i <= n; i++) {
			t = "own-" P[i] "pct"
			v = get("clean", "versionfs", fs, t, 1, "cost")
			printf "| %s | %d%% | %s | %s | %s | %s | %s |\n", fs, P[i], cell("clean", "versionfs", fs, t, 1, "cost"),
			    (c0 == "" || P[i] == 0) ? "–" : sprintf("%.1f", v - c0),
			    fmtl(get("clean", "versionfs", fs, t, 1, "freed_du")), fmtl(get("clean", "versionfs", fs, t, 1, "freed_cleaner")),
			    fmtl(get("clean", "versionfs", fs, t, 1, "unique"))
		}
	}
	print ""
	print "The cost is the wall clock from before `delete` to the end of the cleaning"
	print "pass (vfsops clean: libversionfs, status polled every 1–50 ms). 0%: a"
	print "checkpoint that owns nothing, the fixed cost of a pass (a transaction, a"
	print "durable point); 1% and 10% punch a hole in the content file, 100% deletes it."
	print "freed (du): the store's allocated size before minus after."
	print ""
	print "### Foreground fio randwrite during an online clean"
	print ""
	print "| fs | without, MiB/s | during, MiB/s | during / without | clean, s | clean covered | freed, MiB |"
	print "|---|---|---|---|---|---|---|"
	for (f = 1; f <= nfs; f++) {
		fs = fsorder[f]
		a = get("clean", "versionfs", fs, "randwrite-idle", 1, "bw")
		b = get("clean", "versionfs", fs, "randwrite-cleaning", 1, "bw")
		if (a == "" && b == "") continue
		ov = get("clean", "versionfs", fs, "clean-during-fio", 1, "overlap")
		printf "| %s | %s | %s | %s | %s | %s | %s |\n", fs, cell("clean", "versionfs", fs, "randwrite-idle", 1, "bw"),
		    cell("clean", "versionfs", fs, "randwrite-cleaning", 1, "bw"), rcell(ratio(b, a)),
		    cell("clean", "versionfs", fs, "clean-during-fio", 1, "seconds"), ov == "" ? "–" : sprintf("%.0f%%", ov * 100),
		    fmtl(get("clean", "versionfs", fs, "clean-during-fio", 1, "freed_cleaner"))
	}
	print ""
	print "The deletion: a checkpoint that owns every other page of a big file (one"
	print "hole punched per page). \"clean covered\": the part of fio's runtime the"
	print "cleaning pass lasted; below 100% the ratio understates the interference."
	print ""
}
