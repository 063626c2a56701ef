cd .probe/stage && export LD_LIBRARY_PATH=$PWD/libs:$LD_LIBRARY_PATH
for r in 1 2 3; do
./stage_ab2 $PWD/libs/libgpukit_new.so $PWD/libs/libgpukit_ramp.so
./stage_ab2 $PWD/libs/libgpukit_old.so $PWD/libs/libgpukit_ramp.so
done 2>&1 | tee $OUT/stage_ab2_ramp.txt | grep -v "^lib" | sed "s|$PWD/libs/||g"
