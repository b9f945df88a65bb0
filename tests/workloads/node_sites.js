// Native allocations from a named JavaScript function, for allocscope's
// tests: Buffer.allocUnsafeSlow's memory (64 KiB each, uninitialized) comes
// from the C library's malloc. Prints "ready", runs at SIGUSR2 (node keeps
// SIGUSR1 for its inspector), prints "done BYTES" (the buffers' bytes),
// leaves at the next SIGUSR2.
const kSize = 65536, kRounds = 100, kPerRound = 1000;

function allocateBuffers(n) {
  const kept = [];
  for (let i = 0; i < n; i++) {
    const b = Buffer.allocUnsafeSlow(kSize);
    b[0] = i & 255;
    if (i % 8 === 0) kept.push(b);
    if (kept.length > 64) kept.length = 0;
  }
  return n;
}

let runs = 0;
process.on("SIGUSR2", () => {
  if (runs++ > 0) process.exit(0);
  let buffers = 0;
  for (let round = 0; round < kRounds; round++) buffers += allocateBuffers(kPerRound);
  console.log("done", buffers * kSize);
});
setInterval(() => {}, 1000);
console.log("ready");
