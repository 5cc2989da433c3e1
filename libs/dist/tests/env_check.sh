#!/bin/sh
# env_check.sh ENV_TEST — two ranks started as torchrun starts them (no MPI): both must
# pass. The port is picked from the PID to keep parallel runs apart.
bin=$1
port=$(( 20000 + $$ % 20000 ))
export WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port
RANK=1 timeout 60 "$bin" & p1=$!
RANK=0 timeout 60 "$bin"; rc0=$?
wait $p1; rc1=$?
echo "rank 0 rc=$rc0, rank 1 rc=$rc1"
[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ]
