# shellcheck shell=bash
# bench/lib/report.sh — stats.csv, summary.md and plots of a result dir.
# Sourced by bench/run (also as "bench/run report DIR").  Needs awk and
# gnuplot; no other tool.
#
# Input:  DIR/{fio,mdtest,bonnie,ckpt}.csv in long format
#         (config,fs,test,jobs,metric,value,unit,rep), DIR/info.txt,
#         DIR/raw/failures.txt.
# Output: DIR/stats.csv (family,config,fs,test,jobs,metric,unit,n,median,
#         min,max), DIR/summary.md, DIR/*.png (plot data and scripts in
#         DIR/raw/plots/).

REPORT_LIB=$(dirname "${BASH_SOURCE[0]}")

# Median, min, max and count per (family, config, fs, test, jobs, metric).
report_stats() {
	local dir=$1 f
	{
		echo "family,config,fs,test,jobs,metric,unit,n,median,min,max"
		for f in fio mdtest bonnie ckpt scale clean; do
			[ -f "$dir/$f.csv" ] || continue
			awk -F, -v fam="$f" 'NR > 1 && NF >= 8 && $6 != "" {
				k = fam "," $1 "," $2 "," $3 "," $4 "," $5 "," $7
				if (!(k in cnt)) order[++nk] = k
				v[k, ++cnt[k]] = $6 + 0
			}
			END {
				for (i = 1; i <= nk; i++) {
					k = order[i]; n = cnt[k]
					for (a = 2; a <= n; a++) {	# insertion sort
						x = v[k, a]
						for (b = a - 1; b >= 1 && v[k, b] > x; b--)
							v[k, b + 1] = v[k, b]
						v[k, b + 1] = x
					}
					med = (n % 2) ? v[k, (n + 1) / 2] : (v[k, n / 2] + v[k, n / 2 + 1]) / 2
					printf "%s,%d,%g,%g,%g\n", k, n, med, v[k, 1], v[k, n]
				}
			}' "$dir/$f.csv"
		done
	} >"$dir/stats.csv"
}

# Cautions printed above the tables.
report_warnings() {
	local dir=$1 ncpu load
	ncpu=$(sed -n 's/^cpu: .* x \([0-9]*\)$/\1/p' "$dir/info.txt")
	if grep -q '^mode: quick' "$dir/info.txt"; then
		echo "> **Quick mode**: one repetition of small sizes and 1-second random"
		echo "> tests. The ratios are a smoke test, not a measurement; judge the"
		echo "> targets on a full run (bench/run full)."
		echo
	fi
	for load in $(sed -n 's/^load_at_start: \([0-9.]*\) .*/\1/p' "$dir/info.txt"); do
		if awk -v l="$load" -v n="${ncpu:-1}" 'BEGIN { exit !(l > 0.5 * n) }'; then
			echo "> **Busy machine**: the 1-minute load average was $load on ${ncpu:-?} CPUs"
			echo "> when the run started; other work competed with the"
			echo "> benchmarks and the numbers are noisy."
			echo
			break
		fi
	done
}

report_summary() {
	local dir=$1 have_vfs
	have_vfs=$(grep -c '^versionfs: /' "$dir/info.txt" 2>/dev/null)
	{
		echo "# versionfs benchmarks: $(sed -n 's/^mode: //p' "$dir/info.txt") run of $(sed -n 's/^date: //p' "$dir/info.txt")"
		echo
		echo '```'
		grep -v '^$' "$dir/info.txt"
		echo '```'
		echo
		report_warnings "$dir"
		awk -F, -v have_vfs="$have_vfs" -f "$REPORT_LIB/summary.awk" "$dir/stats.csv"
		if [ -s "$dir/btree.txt" ]; then
			echo
			echo "## libvfsbtree (bench/btree)"
			echo
			echo '```'
			sed -n '/^results:/,$p' "$dir/btree.txt"
			echo '```'
		fi
		if [ -s "$dir/repl.md" ]; then
			echo
			cat "$dir/repl.md"
		fi
		echo
		echo "## Plots"
		echo
		for p in "$dir"/*.png; do
			[ -e "$p" ] || continue
			echo "- [$(basename "$p")]($(basename "$p"))"
		done
		echo
		echo "## Failures"
		echo
		if [ -s "$dir/raw/failures.txt" ]; then
			sed 's/^/- /' "$dir/raw/failures.txt"
		else
			echo "none"
		fi
		echo
		echo "Raw data: the CSV files (long format, one row per repetition),"
		echo "stats.csv (median, min, max), raw/ (fio JSON, bonnie++ output, logs)."
		echo "How to read all this: bench/README.md."
	} >"$dir/summary.md"
}

# ---- plots -------------------------------------------------------------------

report_gnuplot_term() {
	if gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1; then
		echo "pngcairo size 1100,620 font 'Sans,10'"
	else
		echo "png size 1100,620"
	fi
}

CONFIG_COLORS="native:#4c72b0 native-sync1s:#8da0cb native-fresh1s:#64b5cd native-fresh10s:#a6d8e6 passthrough:#dd8452 versionfs:#55a868 versionfs-ckpt1s:#c44e52 versionfs-ckpt10s:#8172b3 versionfs-ckpt60s:#937860 versionfs-ckpt300s:#da8bc3"

report_color() {
	local c
	for c in $CONFIG_COLORS; do
		[ "${c%%:*}" = "$1" ] && { echo "${c#*:}"; return; }
	done
	echo "#7f7f7f"
}

# Configs present in stats.csv for a family, in the canonical order.
report_configs() {
	local dir=$1 fam=$2 c
	for c in native native-sync1s native-fresh1s native-fresh10s passthrough versionfs versionfs-ckpt300s versionfs-ckpt60s versionfs-ckpt10s versionfs-ckpt1s; do
		grep -q "^$fam,$c," "$dir/stats.csv" && echo "$c"
	done
}

# Clustered bars: one cluster per (fs, jobs), one bar per config, min-max bars.
report_plot_fio() {
	local dir=$1 pd=$2 term=$3 test=$4 configs dat gp i c title
	# the configs with a number for this test (native-fresh: randwrite only)
	configs=$(for c in $(report_configs "$dir" fio); do
		grep -q "^fio,$c,[^,]*,$test," "$dir/stats.csv" && echo "$c"
	done)
	[ -n "$configs" ] || return 0
	dat=$pd/fio-$test.dat
	awk -F, -v test="$test" -v configs="$configs" '
		BEGIN { nc = split(configs, cf, /[ \n]+/) }
		$1 == "fio" && $4 == test && $6 == "bw" {
			k = $3 " j" $5
			if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
			m[k, $2] = $9; lo[k, $2] = $10; hi[k, $2] = $11
		}
		END {
			for (i = 1; i <= nk; i++) {
				k = order[i]; line = "\"" k "\""
				for (j = 1; j <= nc; j++) {
					c = cf[j]
					if ((k, c) in m) line = line " " m[k, c] " " lo[k, c] " " hi[k, c]
					else line = line " NaN NaN NaN"
				}
				print line
			}
		}' "$dir/stats.csv" >"$dat"
	case $test in
	seqwrite) title="Sequential write, 1 MiB blocks, end fsync" ;;
	seqread) title="Sequential read, 1 MiB blocks, cold cache" ;;
	randwrite) title="Random write, 4 KiB, end fsync" ;;
	randread) title="Random read, 4 KiB, cold cache" ;;
	esac
	gp=$pd/fio-$test.gp
	{
		echo "set terminal $term"
		echo "set output '$dir/fio-$test.png'"
		echo "set title \"fio: $title (median; bars: min-max)\""
		echo "set datafile missing 'NaN'"
		echo "set style data histogram"
		echo "set style histogram errorbars gap 2 lw 1"
		echo "set style fill solid 0.85 border -1"
		echo "set boxwidth 0.9"
		echo "set ylabel 'MiB/s'"
		echo "set yrange [0:*]"
		echo "set grid ytics"
		echo "set key outside right top"
		printf "plot "
		i=0
		for c in $configs; do
			[ $i -gt 0 ] && printf ", \\\\\n     "
			if [ $i -eq 0 ]; then
				printf "'%s' using %d:%d:%d:xtic(1) title '%s' lc rgb '%s'" "$dat" $((2 + 3 * i)) $((3 + 3 * i)) $((4 + 3 * i)) "$c" "$(report_color "$c")"
			else
				printf "'' using %d:%d:%d title '%s' lc rgb '%s'" $((2 + 3 * i)) $((3 + 3 * i)) $((4 + 3 * i)) "$c" "$(report_color "$c")"
			fi
			i=$((i + 1))
		done
		echo
	} >"$gp"
	gnuplot "$gp" 2>>"$pd/gnuplot.log"
}

# One panel per test, one bar per config (boxes + min-max error bars).
# report_plot_panels DIR PD TERM FAMILY FS OUTNAME TITLE YLABEL LOG TESTS...
report_plot_panels() {
	local dir=$1 pd=$2 term=$3 fam=$4 fs=$5 out=$6 title=$7 ylabel=$8 logy=$9
	shift 9
	local configs tests="" t n=0 gp dat c i label
	configs=$(report_configs "$dir" "$fam")
	[ -n "$configs" ] || return 0
	for t in "$@"; do
		grep -q "^$fam,[^,]*,$fs,${t%%:*}," "$dir/stats.csv" && { tests="$tests $t"; n=$((n + 1)); }
	done
	[ "$n" -gt 0 ] || return 0
	gp=$pd/$out.gp
	{
		echo "set terminal $term"
		echo "set output '$dir/$out.png'"
		echo "set multiplot layout 1,$n title \"$title ($fs; median, bars: min-max)\""
		echo "set style fill solid 0.85 border -1"
		echo "set boxwidth 0.7"
		echo "set grid ytics"
		echo "set xtics rotate by -35 left font ',8'"
		echo "unset key"
		echo "set bmargin 6"
		echo "set offsets 0, 0, graph 0.08, 0"
		[ "$logy" = 1 ] && echo "set logscale y"
		for t in $tests; do
			label=${t#*:}
			t=${t%%:*}
			dat=$pd/$out-$t.dat
			i=0
			for c in $configs; do
				awk -F, -v fam="$fam" -v fs="$fs" -v t="$t" -v c="$c" -v i="$i" -v col="0x$(report_color "$c" | cut -c2-)" '
					$1 == fam && $2 == c && $3 == fs && $4 == t {
						printf "%d \"%s\" %s %s %s %d\n", i, c, $9, $10, $11, col; found = 1
					}
					END { if (!found) printf "%d \"%s\" NaN NaN NaN 0\n", i, c }' "$dir/stats.csv"
				i=$((i + 1))
			done >"$dat"
			echo "set title '${label//_/ }'"
			echo "set ylabel '$ylabel'"
			if [ "$logy" = 1 ]; then
				echo "set yrange [*:*]"
			else
				echo "set yrange [0:*]"
			fi
			echo "set xrange [-0.6:$((i - 1)).6]"
			echo "plot '$dat' using 1:3:6:xtic(2) with boxes lc rgb variable, '' using 1:3:4:5 with yerrorbars lc rgb 'black' pt 7 ps 0.3"
		done
		echo "unset multiplot"
	} >"$gp"
	gnuplot "$gp" 2>>"$pd/gnuplot.log"
}

report_plot_ckpt() {
	local dir=$1 pd=$2 term=$3 dat fs gp first=1 series cfg pre label
	dat=$pd/ckpt.dat
	grep -q '^ckpt,versionfs,[^,]*,dirty' "$dir/stats.csv" || return 0
	gp=$pd/ckpt.gp
	{
		echo "set terminal $term"
		echo "set output '$dir/ckpt-latency.png'"
		echo "set title 'checkpoint latency, 100 dirty files (median; bars: min-max)'"
		echo "set logscale x"
		awk -F, '$1 == "ckpt" && $4 ~ /^dirty[0-9]+-of-/ { n = $4; sub(/^dirty[0-9]+-of-/, "", n)
			if (lo == "" || n + 0 < lo) lo = n + 0; if (n + 0 > hi) hi = n + 0 }
			END { if (lo != "") printf "set xrange [%g:%g]\n", lo / 2, hi * 2 }' "$dir/stats.csv"
		echo "set xlabel 'files in the mount'"
		echo "set ylabel 'ms'"
		echo "set yrange [0:*]"
		echo "set grid"
		echo "set key top left"
		printf "plot "
		for fs in $(awk -F, '$1 == "ckpt" { print $3 }' "$dir/stats.csv" | awk '!s[$0]++'); do
			for series in "versionfs:dirty:versionfs checkpoint" \
			    "native:dirty:native rewrite + syncfs" \
			    "native:storefloor:store floor (200 new files + syncfs)"; do
				cfg=${series%%:*}; pre=${series#*:}; label=${pre#*:}; pre=${pre%%:*}
				awk -F, -v fs="$fs" -v cfg="$cfg" -v pre="$pre" '$1 == "ckpt" && $2 == cfg && $3 == fs && $6 == "latency" && $4 ~ ("^" pre "[0-9]+-of-") {
					n = $4; sub(/^[a-z]+[0-9]+-of-/, "", n); print n, $9, $10, $11 }' \
					"$dir/stats.csv" | sort -n >"$dat.$fs.$cfg.$pre"
				[ -s "$dat.$fs.$cfg.$pre" ] || continue
				[ $first = 1 ] || printf ", "
				printf "'%s' using 1:2:3:4 with yerrorlines title '%s: %s'" "$dat.$fs.$cfg.$pre" "$fs" "$label"
				first=0
			done
		done
		echo
	} >"$gp"
	gnuplot "$gp" 2>>"$pd/gnuplot.log"
}

# Lines against a number in the test name: one line per (fs, series).
# report_plot_lines DIR PD TERM OUT TITLE XLABEL YLABEL LOGSCALE SERIES...
# SERIES: family:test-prefix:metric:label (tests named PREFIX<number>).
report_plot_lines() {
	local dir=$1 pd=$2 term=$3 out=$4 title=$5 xlabel=$6 ylabel=$7 logs=$8
	shift 8
	local gp=$pd/$out.gp fs sp fam pre met label dat first=1 fslist
	fslist=$(awk -F, 'NR > 1 { print $3 }' "$dir/stats.csv" | awk '!s[$0]++')
	{
		echo "set terminal $term"
		echo "set output '$dir/$out.png'"
		echo "set title \"$title (median; bars: min-max)\""
		[ -n "$logs" ] && echo "set logscale $logs"
		echo "set xlabel '$xlabel'"
		echo "set ylabel '$ylabel'"
		echo "set grid"
		echo "set key top left"
		if [ -n "$logs" ]; then
			echo "set offsets graph 0.05, graph 0.05, graph 0.05, 0"
		else
			echo "set xrange [0:*]"
			echo "set yrange [0:*]"
			echo "set offsets 0, graph 0.05, graph 0.05, 0"
		fi
		printf "plot "
		for fs in $fslist; do
			for sp in "$@"; do
				IFS=: read -r fam pre met label <<<"$sp"
				dat=$pd/$out-$fs-$pre$met.dat
				awk -F, -v fam="$fam" -v fs="$fs" -v pre="$pre" -v met="$met" '
					$1 == fam && $3 == fs && $6 == met && index($4, pre) == 1 {
						n = substr($4, length(pre) + 1)
						if (n ~ /^[0-9]+$/) print n, $9, $10, $11
					}' "$dir/stats.csv" | sort -n >"$dat"
				[ -s "$dat" ] || continue
				[ $first = 1 ] || printf ", \\\\\n     "
				printf "'%s' using 1:2:3:4 with yerrorlines title '%s %s'" "$dat" "$fs" "$label"
				first=0
			done
		done
		echo
	} >"$gp"
	[ $first = 0 ] || return 0
	gnuplot "$gp" 2>>"$pd/gnuplot.log"
}

# Clustered bars of one family: one cluster per (fs, test), one bar per
# metric-or-test column.  report_plot_bars DIR PD TERM OUT TITLE YLABEL
# FAMILY METRIC "TEST:label ..." (clusters) ; bars are the file systems.
report_plot_bars() {
	local dir=$1 pd=$2 term=$3 out=$4 title=$5 ylabel=$6 fam=$7 met=$8 tests=$9
	local gp=$pd/$out.gp dat=$pd/$out.dat fslist i fs
	fslist=$(awk -F, -v fam="$fam" '$1 == fam { print $3 }' "$dir/stats.csv" | awk '!s[$0]++')
	[ -n "$fslist" ] || return 0
	awk -F, -v fam="$fam" -v met="$met" -v tests="$tests" -v fsl="$fslist" '
		BEGIN { nt = split(tests, tl, / /); nf = split(fsl, fv, /[ \n]+/) }
		$1 == fam && $6 == met { m[$3, $4] = $9; lo[$3, $4] = $10; hi[$3, $4] = $11 }
		END {
			for (t = 1; t <= nt; t++) {
				split(tl[t], x, /:/)
				lab = x[2]; gsub(/_/, " ", lab)
				line = "\"" lab "\""; any = 0
				for (f = 1; f <= nf; f++)
					if ((fv[f], x[1]) in m) { line = line " " m[fv[f], x[1]] " " lo[fv[f], x[1]] " " hi[fv[f], x[1]]; any = 1 }
					else line = line " NaN NaN NaN"
				if (any) print line
			}
		}' "$dir/stats.csv" >"$dat"
	[ -s "$dat" ] || return 0
	{
		echo "set terminal $term"
		echo "set output '$dir/$out.png'"
		echo "set title \"$title (median; bars: min-max)\""
		echo "set datafile missing 'NaN'"
		echo "set style data histogram"
		echo "set style histogram errorbars gap 2 lw 1"
		echo "set style fill solid 0.85 border -1"
		echo "set boxwidth 0.9"
		echo "set ylabel '$ylabel'"
		echo "set yrange [0:*]"
		echo "set grid ytics"
		echo "set key outside right top"
		printf "plot "
		i=0
		for fs in $fslist; do
			[ $i -gt 0 ] && printf ", \\\\\n     "
			if [ $i -eq 0 ]; then
				printf "'%s' using %d:%d:%d:xtic(1) title '%s'" "$dat" $((2 + 3 * i)) $((3 + 3 * i)) $((4 + 3 * i)) "$fs"
			else
				printf "'' using %d:%d:%d title '%s'" $((2 + 3 * i)) $((3 + 3 * i)) $((4 + 3 * i)) "$fs"
			fi
			i=$((i + 1))
		done
		echo
	} >"$gp"
	gnuplot "$gp" 2>>"$pd/gnuplot.log"
}

# The scale and clean families (versionfs only).
report_plot_scale_clean() {
	local dir=$1 pd=$2 term=$3
	report_plot_lines "$dir" "$pd" "$term" scale-rollback \
		"versionfs-ctl rollback latency against the files changed" \
		"files changed" "ms" xy scale:rollback-:latency:rollback
	report_plot_lines "$dir" "$pd" "$term" scale-firstwrite \
		"4 KiB write + fsync after a checkpoint against the file's extents" \
		"extents in the map (about)" "ms" xy \
		"scale:write-ext:first_write:first write" "scale:write-ext:second_write:second write"
	report_plot_lines "$dir" "$pd" "$term" scale-memory \
		"versionfs daemon memory against open files" "files open" "MiB" "" \
		scale:open-:VmRSS:VmRSS scale:open-:RssAnon:RssAnon
	report_plot_bars "$dir" "$pd" "$term" clean-cost \
		"delete + clean of a checkpoint owning part of a file" "ms" clean cost \
		"own-0pct:owns_0% own-1pct:owns_1% own-10pct:owns_10% own-100pct:owns_100%"
	report_plot_bars "$dir" "$pd" "$term" clean-fio \
		"fio 4 KiB random write, without and during an online clean" "MiB/s" clean bw \
		"randwrite-idle:without_clean randwrite-cleaning:during_clean"
}

# The repl family: 004's Figure 8, data sent per checkpoint period by a
# RAID1 mirror (every write) and by versionfs (its streams).
report_plot_repl() {
	local dir=$1 pd=$2 term=$3 dat=$2/repl-table2.dat mib
	[ -s "$dir/repl-table2.csv" ] || return 0
	awk -F, 'NR > 1 { r[$1] += $4; s[$1] += $5 }
		END { n = split("1 2 3 full", o, " ")
		      for (i = 1; i <= n; i++) if (o[i] in r)
			printf "\"%s\" %.3f %.3f\n", (o[i] == "full" ? "full run" : o[i] " step" (o[i] > 1 ? "s" : "")),
				r[o[i]] / 1048576, s[o[i]] / 1048576 }' "$dir/repl-table2.csv" >"$dat"
	mib=$(sed -n 's/^repl: Table 2 on a \([0-9]*\) MiB.*/\1/p' "$dir/info.txt")
	{
		echo "set terminal $term"
		echo "set output '$dir/repl-table2.png'"
		echo "set title \"004's Table 2 replayed: data sent to the replica (one ${mib:-?} MiB Bonnie++ file)\""
		echo "set ylabel 'MiB sent'"
		echo "set xlabel 'checkpoint period (Bonnie++ steps)'"
		echo "set style data histograms"
		echo "set style histogram clustered gap 1"
		echo "set style fill solid 0.8 border -1"
		echo "set yrange [0:*]"
		echo "set key below"
		echo "plot '$dat' using 2:xtic(1) title 'RAID1 (every write)' lc rgb '#4c72b0', '' using 3 title 'versionfs (stream bytes)' lc rgb '#55a868'"
	} >"$pd/repl-table2.gp"
	gnuplot "$pd/repl-table2.gp" 2>>"$pd/gnuplot.log"
	report_plot_repl_ack "$dir" "$pd" "$term"
}

# The repl family: every checkpoint's time to the peer's acknowledgement
# and the local one's, sorted, one line per build and mode.
report_plot_repl_ack() {
	local dir=$1 pd=$2 term=$3 key plot="" i=0 t
	[ -s "$dir/repl-ack.csv" ] || return 0
	for key in $(awk -F, 'NR > 1 && !s[$1 "," $2]++ { print $1 "," $2 }' "$dir/repl-ack.csv"); do
		awk -F, -v k="$key" 'NR > 1 && $1 "," $2 == k { print $5 }' "$dir/repl-ack.csv" |
			sort -g | awk '{ print NR, $1 }' >"$pd/repl-ack-$i.dat"
		case $key in
		*,local) t="local checkpoint" ;;
		*,peer-owndisk) t="to the peer's ACK, replica on its own disk" ;;
		*,peer-samedisk) t="to the peer's ACK, replica on the sender's disk" ;;
		*) t=${key#*,} ;;
		esac
		plot="$plot${plot:+, }'$pd/repl-ack-$i.dat' using 1:2 with linespoints title \"${key%%,*}: $t\""
		i=$((i + 1))
	done
	{
		echo "set terminal $term"
		echo "set output '$dir/repl-ack.png'"
		echo "set title 'Checkpoint of 100 dirty 4 KiB files: each checkpoint, sorted'"
		echo "set ylabel 'ms (versionfs-ctl checkpoint, process included)'"
		echo "set xlabel 'checkpoints, fastest first'"
		echo "set yrange [0:*]"
		echo "set key top left"
		echo "plot $plot"
	} >"$pd/repl-ack.gp"
	gnuplot "$pd/repl-ack.gp" 2>>"$pd/gnuplot.log"
}

report_plots() {
	local dir=$1 pd=$1/raw/plots term t fs fslist
	mkdir -p "$pd"
	: >"$pd/gnuplot.log"
	rm -f "$dir"/*.png
	term=$(report_gnuplot_term)
	for t in seqwrite seqread randwrite randread; do
		report_plot_fio "$dir" "$pd" "$term" "$t"
	done
	fslist=$(awk -F, 'NR > 1 { print $3 }' "$dir/stats.csv" | awk '!s[$0]++')
	for fs in $fslist; do
		report_plot_panels "$dir" "$pd" "$term" mdtest "$fs" "mdtest-$fs" \
			"Metadata: files in one directory" "ops/s" 0 \
			create:create "stat:stat_(cached)" "stat_cold:stat_(cold_cache)" unlink:unlink
		# The shape of Figures 5, 6 and 7 of the versioning paper (004):
		# one panel per Bonnie++ step, one bar per checkpoint period.
		report_plot_panels "$dir" "$pd" "$term" bonnie "$fs" "bonnie-fig5-write-$fs" \
			"Bonnie++ write (Fig. 5)" "MiB/s" 0 \
			putc:per-char_write put_block:per-block_write rewrite:rewrite
		report_plot_panels "$dir" "$pd" "$term" bonnie "$fs" "bonnie-fig6-read-$fs" \
			"Bonnie++ read (Fig. 6)" "MiB/s" 0 \
			getc:per-char_read get_block:per-block_read "seeks:random_seeks_(/s)"
		report_plot_panels "$dir" "$pd" "$term" bonnie "$fs" "bonnie-fig7-create-$fs" \
			"Bonnie++ file creation/deletion (Fig. 7)" "files/s" 0 \
			ran_create:random_create ran_delete:random_delete \
			seq_create:sequential_create seq_delete:sequential_delete
	done
	report_plot_ckpt "$dir" "$pd" "$term"
	report_plot_scale_clean "$dir" "$pd" "$term"
	report_plot_repl "$dir" "$pd" "$term"
	if [ -s "$pd/gnuplot.log" ]; then
		echo "report: gnuplot complained, see $pd/gnuplot.log" >&2
	fi
}

report_all() {
	local dir=$1
	report_stats "$dir" || return 1
	report_plots "$dir"
	report_summary "$dir"
}
