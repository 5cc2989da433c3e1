#!/usr/bin/env python3
"""tools/gpu/torch_matvec.py — PyTorch's (cuBLAS's) bf16 matrix-vector products on the 1.1 B
llama's decode shapes, as a yardstick for rlx's matvec kernels on the same GPU: each shape
cycles through copies of its weights (more than L2 holds), 32 calls captured in one CUDA
Graph, µs a call and GB/s of weight bytes next to a device-to-device copy's bandwidth.
H100, 2026-12-05: qkv 6.45 us, o 6.09, gate/up 17.8, down 11.9, output 49.1 (1 row)."""
import torch
import torch.nn.functional as F

SHAPES = {'qkv': (2560, 2048), 'o': (2048, 2048), 'gate_up': (11264, 2048),
          'down': (2048, 5632), 'output': (32000, 2048)}


def timed(fn, reps=20):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    torch.cuda.synchronize()
    best = 1e30
    for _ in range(reps):
        s.record()
        fn()
        e.record()
        e.synchronize()
        best = min(best, s.elapsed_time(e) / 1000)
    return best


def main():
    dev = torch.device('cuda')
    a = torch.empty(1 << 28, dtype=torch.uint8, device=dev)
    b = torch.empty_like(a)
    bw = 2 * a.numel() / timed(lambda: b.copy_(a))
    print(f'{torch.cuda.get_device_name()}: copy {bw / 1e9:.0f} GB/s (read + write)')
    for m in (1, 8):
        for name, (n, k) in SHAPES.items():
            copies = max(2, (256 << 20) // (n * k * 2))
            ws = [torch.randn(n, k, device=dev).to(torch.bfloat16) for _ in range(copies)]
            x = torch.randn(m, k, device=dev).to(torch.bfloat16)
            calls = 32
            F.linear(x, ws[0])  # cuBLAS's handle and workspace, outside the capture
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for i in range(calls):
                    F.linear(x, ws[i % copies])
            t = timed(g.replay) / calls
            print(f'm{m} {name:8s} [{n}x{k}] {t * 1e6:7.2f} us  {n * k * 2 / t / 1e9:6.0f} GB/s'
                  f'  {n * k * 2 / t / bw:5.2f} of copy')
            del ws, g


if __name__ == '__main__':
    main()
