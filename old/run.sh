python3 -m pip install -q --no-index --no-deps --target .site .whl/*.whl 2>/dev/null
NEW=$PWD/.site:$(ls -d $PWD/packages/*/src | tr "\n" ":")
OLD=$PWD/.site:$(ls -d $PWD/old/packages/*/src | tr "\n" ":")
export PYTHONUNBUFFERED=1
PYTHONPATH=$NEW TC_CACHE_DIR=/tmp/tcn timeout 150 python3 -m pytest -q -m gpu packages/tc-torch/tests/test_torch_stream_k.py -p no:cacheprovider 2>&1 | tail -3
S="256,128,32,8,4,p;256,128,32,8,4,p,k;256,128,32,8,4,p,g4;256,128,32,8,4,p,k,g4"
for size in 4096 8192; do
 for tree in NEW OLD NEW; do
  echo "== $tree $size"
  if [ $tree = NEW ]; then P=$NEW; C=/tmp/tcn; else P=$OLD; C=/tmp/tco; fi
  PYTHONPATH=$P TC_CACHE_DIR=$C timeout 100 python3 tools/bench_matmul_configs.py --size $size --dtype tf32 --layout nn --specs "$S" --order bench-first --rounds 4 2>&1 | grep "^| 256\|cuBLAS |"
 done
done
M=gpc__cycles_elapsed.max,dram__bytes_read.sum,lts__t_sector_hit_rate.pct
for size in 4096 8192; do echo "== ncu NEW k $size"; PYTHONPATH=$NEW TC_CACHE_DIR=/tmp/tcn timeout 90 ncu --clock-control none -k regex:'^matmul$' --launch-skip 2 --launch-count 1 --metrics $M python3 tools/ncu_matmul.py --kernel nn --size $size --config 256,128,32,8,4,p,k 2>&1 | grep -E "gpc__|dram__|lts__"; done
