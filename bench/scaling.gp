# Line charts of the client-scaling run (bash bench/clients.sh): IDs/s against
# clients (left) and the ratio to one client (right), one line per generator;
# reference rows (no target) dashed; beyond nproc clients the CPUs are
# oversubscribed (shaded); the right panel has the ideal (one client's rate
# per client, up to nproc) and the target at `at` clients.
# Called by bench/bench.py with: datafile, datafile2, outfile, term, ncols,
# dashes (1 or 2 per generator), maxclients, nproc, want, at, subtitle.
# data files: header row (clients, generator names), then one row per client count.
if (term eq 'pngcairo') {
	set terminal pngcairo size 1200,640 font 'Sans,10' noenhanced
} else {
	set terminal png size 1200,640 noenhanced
}
set output outfile
set datafile separator "\t"
set logscale x 2
set xrange [0.85:maxclients * 1.18]
colours = "#4c72b0 #dd8452 #55a868 #c44e52 #8172b2 #937860 #da8bc3 #8c8c8c #ccb974 #64b5cd #1b2f52 #7f3f00 #2f7f2f"
set xlabel "clients (each its own connection)"
set grid
# oversubscribed: more clients than CPUs
if (maxclients > nproc) {
	set object 1 rect from nproc, graph 0 to maxclients * 1.18, graph 1 fc rgb "#eeeeee" fs solid 1.0 noborder behind
	set label 1 sprintf("oversubscribed (> %d CPUs)", nproc) at graph 0.98, graph 0.96 right textcolor rgb "#777777"
}
# two panels side by side, the legend of both below them across the width
set multiplot
set label 100 "Client scaling: SELECT count(f()) FROM generate_series(1, N) per transaction (pgbench -M prepared)\n".subtitle at screen 0.5, screen 0.975 center
set tmargin at screen 0.86
set bmargin at screen 0.30
set lmargin at screen 0.07
set rmargin at screen 0.47
unset key
set title "IDs per second (median)"
set ylabel "IDs/s"
set format y "%.1s%c"
set yrange [0:*]
plot for [i=2:ncols+1] datafile using 1:i:xtic(1) with linespoints lw 2 pt 7 dt int(word(dashes, i - 1)) lc rgb word(colours, i - 1)
unset label 100
set lmargin at screen 0.56
set rmargin at screen 0.97
set title sprintf("IDs/s against 1 client (target: %gx at %d clients on %d cores)", want, at, at)
set ylabel "x 1 client"
set format y "%g"
ideal(x) = x < nproc ? x : nproc
# the target, where this machine can show it
if (maxclients >= at && nproc >= at) {
	set arrow 1 from graph 0, first want to graph 1, first want nohead dt 3 lw 1.5 lc rgb "#c44e52" front
	set label 2 sprintf("target: %gx at %d clients", want, at) at graph 0.02, first want offset 0,0.7 textcolor rgb "#c44e52"
	eval sprintf("set yrange [0:%g<*]", want * 1.1)
}
plot for [i=2:ncols+1] datafile2 using 1:i:xtic(1) with linespoints lw 2 pt 7 dt int(word(dashes, i - 1)) lc rgb word(colours, i - 1), \
     ideal(x) with lines dt 2 lw 1 lc rgb "#555555"
# the legend: the same lines, drawn outside an empty frame
unset object 1
unset label 1
unset arrow 1
unset label 2
unset title
unset xlabel
unset ylabel
unset tics
unset border
unset grid
unset logscale x
set xrange [0:1]
set yrange [0:1]
set tmargin at screen 0.20
set bmargin at screen 0.01
set lmargin at screen 0.02
set rmargin at screen 0.98
set key center center horizontal maxcols 3 reverse Left samplen 3 width 2
plot for [i=2:ncols+1] datafile using (0.5):(-1) with linespoints lw 2 pt 7 dt int(word(dashes, i - 1)) lc rgb word(colours, i - 1) title columnheader(i), \
     -1 with lines dt 2 lw 1 lc rgb "#555555" title "one CPU per client, up to the CPUs"
unset multiplot
