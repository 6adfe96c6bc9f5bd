# Clustered bars: rows/s of INSERT ... SELECT into a table per primary key
# default, one cluster per primary key, one bar per table size.
# Called by bench/bench.py with: datafile, outfile, term, nsizes, subtitle.
# datafile: header row (label, sizes), then label <TAB> rows/s per size.
if (term eq 'pngcairo') {
	set terminal pngcairo size 960,560 font 'Sans,10' noenhanced
} else {
	set terminal png size 960,560 noenhanced
}
set output outfile
set datafile separator "\t"
set title "INSERT INTO t (buyer, amount) SELECT ... : rows per second by primary key\n".subtitle
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set xtics rotate by 20 right nomirror scale 0
set ylabel "rows/s (median; higher is better)"
set format y "%.1s%c"
set yrange [0:*]
set grid ytics
set key top right
set bmargin 8
set lmargin 16
colours = "#8fb0de #4c72b0 #2a4a7f #1b2f52"
plot for [i=2:nsizes+1] datafile using i:xtic(1) lc rgb word(colours, i - 1) title columnheader(i)
