/**
 * A preload for `pnpm bench e2e` that measures what a run allocates: with it, every `muse` process
 * appends one line to `$BENCH_ALLOC_OUT` (default `bench/out/alloc.txt`) at exit: the CLI it ran, the
 * bytes it allocated on the JS heap (the growth of the used heap between collections, summed over a
 * `v8.GCProfiler` record of every collection), its young- and old-generation collections, their time,
 * and its CPU time. Unlike CPU time, the allocation barely moves with the machine's load.
 *
 * @example
 * ```sh
 * BENCH_E2E_NODE_ARGS=--require=$PWD/bench/e2e-alloc.cjs BENCH_E2E_BASELINE_BIN=<main>/packages/cli/dist/bin.js \
 *   BENCH_E2E_PEERS=none BENCH_E2E_TURNS=20,500 BENCH_E2E_FORMATS=chat pnpm bench e2e && cat bench/out/alloc.txt
 * ```
 */
const v8 = require("node:v8")
const fs = require("node:fs")
const path = require("node:path")

const profiler = new v8.GCProfiler()
profiler.start()
const usedAtStart = v8.getHeapStatistics().used_heap_size
const out = process.env.BENCH_ALLOC_OUT ?? path.join(__dirname, "out", "alloc.txt")

process.on("exit", () => {
  const { statistics } = profiler.stop()
  let allocated = 0
  let previous = usedAtStart
  let young = 0
  let old = 0
  let gcMs = 0
  for (const s of statistics) {
    allocated += s.beforeGC.heapStatistics.usedHeapSize - previous
    previous = s.afterGC.heapStatistics.usedHeapSize
    if (s.gcType === "Scavenge" || s.gcType === "MinorMarkSweep") young++
    else old++
    gcMs += s.cost / 1000
  }
  allocated += v8.getHeapStatistics().used_heap_size - previous
  const cpu = process.cpuUsage()
  fs.mkdirSync(path.dirname(out), { recursive: true })
  fs.appendFileSync(
    out,
    `${process.argv[1]} allocated=${(allocated / 1048576).toFixed(1)}MB young=${young} old=${old} gc=${gcMs.toFixed(0)}ms cpu=${((cpu.user + cpu.system) / 1000).toFixed(0)}ms\n`
  )
})
