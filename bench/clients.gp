# Line chart: IDs/s against the number of pgbench clients, one line per
# generator; left panel 1 ID per transaction, right panel 1,000.
# Called by bench/bench.py with: datafile, datafile2, outfile, term, ncols, ncols2
# (the generators of each panel: the first ncols are the same in both), maxclients,
# subtitle.
# data files: header row (clients, generator names), then one row per client count.
if (term eq 'pngcairo') {
	set terminal pngcairo size 1100,480 font 'Sans,10' noenhanced
} else {
	set terminal png size 1100,480 noenhanced
}
set output outfile
set datafile separator "\t"
set logscale x 2
set xrange [0.85:maxclients * 1.18]
colours = "#4c72b0 #dd8452 #55a868 #c44e52 #8172b2 #937860 #da8bc3 #8c8c8c"
set xlabel "clients"
set ylabel "IDs/s (median)"
set format y "%.1s%c"
set yrange [0:*]
set grid
set bmargin 8
set multiplot layout 1,2 title "IDs per second with many clients (pgbench -M prepared)\n".subtitle
unset key
set title "1 ID per transaction: SELECT f();"
plot for [i=2:ncols+1] datafile using 1:i:xtic(1) with linespoints lw 2 pt 7 lc rgb word(colours, i - 1) title columnheader(i)
# one legend for both panels (the right one has every generator), centred under them
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 4 reverse Left width -2 samplen 2
set title "1,000 IDs per transaction: SELECT count(f()) FROM generate_series(1, 1000);"
plot for [i=2:ncols2+1] datafile2 using 1:i:xtic(1) with linespoints lw 2 pt 7 lc rgb word(colours, i - 1) title columnheader(i)
unset multiplot
