# The tutorial's first figure: mean time per run (with std) of the single
# device, naive model parallel and pipelined ResNet-50.
#   gnuplot -e 'outdir="bench/split_size/out"; setup="..."' bench/split_size/modes.gp
# Reads outdir/modes.csv (label,mean_s,std_s), writes outdir/modes.png.
if (!exists("outdir")) outdir = "bench/split_size/out"
if (!exists("setup")) setup = "ResNet-50"
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo size 800,500 font "sans,11"
} else {
  set terminal png size 800,500
}
set output outdir."/modes.png"
set datafile separator ","
set title "Single device vs model parallel vs pipelined (".setup.")"
set ylabel "ResNet-50 execution time (s)"
set yrange [0:*]
set style fill solid 0.6 border -1
set boxwidth 0.5
set xrange [-0.6:2.6]
set grid ytics
unset key
plot outdir."/modes.csv" skip 1 using 0:2:3:xtic(1) with boxerrorbars lc rgb "#4c72b0", \
     "" skip 1 using 0:($2 + $3):(sprintf("%.2f s", $2)) with labels offset 0,1
