# The tutorial's second figure: time per run against split_size for the plain
# pipeline and the stream pipeline (copies on the copy stream), with the
# single-device and model-parallel times as reference lines.
#   gnuplot -e 'outdir="bench/split_size/out"; single=1.0; model_parallel=1.0' bench/split_size/split_size.gp
# Reads outdir/split_sizes.csv, writes outdir/split_size.png.
if (!exists("outdir")) outdir = "bench/split_size/out"
if (!exists("setup")) setup = "ResNet-50"
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo size 800,500 font "sans,11"
} else {
  set terminal png size 800,500
}
set output outdir."/split_size.png"
set datafile separator ","
set title "Pipeline time vs split size (".setup.")"
set xlabel "split size (images per micro-batch)"
set ylabel "ResNet-50 execution time (s)"
set logscale x 2
set offsets graph 0.05, graph 0.05, 0, 0
set yrange [0:*]
set grid
set key top right
plot outdir."/split_sizes.csv" skip 1 using 1:2:3 with yerrorlines lw 2 pt 7 title "pipeline", \
     "" skip 1 using 1:4:5 with yerrorlines lw 2 pt 5 title "stream pipeline", \
     (exists("single") ? single : 1/0) with lines dt 2 lc rgb "gray40" title "single device", \
     (exists("model_parallel") ? model_parallel : 1/0) with lines dt 3 lc rgb "black" title "model parallel"
