# Bar chart: ns per ID of each generator in one backend.
# Called by bench/bench.py with: datafile, outfile, term, nrows, height (pixels), floor, subtitle.
# datafile: label <TAB> ns per ID <TAB> bar colour (0xRRGGBB), one row per generator.
if (term eq 'pngcairo') {
	set terminal pngcairo size 960,height font 'Sans,10' noenhanced
} else {
	set terminal png size 960,height noenhanced
}
set output outfile
set datafile separator "\t"
set title "Cost per ID in one backend: SELECT count(f()) FROM generate_series(1, N)\n".subtitle
stats datafile using 2 nooutput
set xrange [0:STATS_max * 1.15]
set yrange [nrows - 0.4:-0.6]
set ytics nomirror scale 0
set xtics nomirror
set grid xtics
set xlabel "ns per ID (median; lower is better)"
set style fill solid 0.85 border -1
set style textbox opaque noborder margins 1,1
# the clock_timestamp() floor, dashed
set arrow from floor, graph 0 to floor, graph 1 nohead dt 2 lc rgb "#555555" back
unset key
plot datafile using ($2 / 2):0:($2 / 2):(0.35):3:ytic(1) with boxxyerror lc rgb variable, \
     '' using 2:0:(sprintf("%.0f", $2)) with labels left offset 0.6,0 boxed
