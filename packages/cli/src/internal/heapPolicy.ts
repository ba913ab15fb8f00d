/**
 * How the V8 heap of a `muse` process may grow. V8's defaults favour throughput over memory: the
 * young generation's semi-spaces grow to 16 MiB each (32 MiB resident), and the old generation
 * may grow up to four times what the last full collection kept before the next one. A session
 * keeps little (≈ 30 MiB live after 500 tool calls), but each turn leaves garbage the size of its
 * request behind in the old generation, so its peak memory was mostly garbage waiting for a
 * collection. This policy, set once the process runs:
 *
 * - the next full collection starts when the old generation has doubled over what the last one
 *   kept (`--heap-growing-percent=100`; V8's own factor is 1.1 to 4, by its GC speed). Growth by half
 *   (50%) peaked no lower at 500 tool calls (137–165 against 144–145 MiB, `pnpm bench e2e`) and cost
 *   6–9% more CPU per turn;
 * - the semi-spaces stop growing at 8 MiB each (`--semi-space-growth-factor=1` from then on).
 *
 * V8 takes these flags at run time, but they enter its flag hash: a code cache is rejected by a
 * start whose flags differ from those it was made under. So the policy is applied once the code
 * cache has been read (the script compiled, before it runs: the first full collection sizes the
 * heap), and a cache is made under V8's defaults ({@link withDefaultFlags}). `MUSE_HEAP_POLICY=0`,
 * or a heap flag of Node's own (`--max-semi-space-size`, `--heap-growing-percent`…, in the command
 * line or `NODE_OPTIONS`), leaves V8's defaults alone.
 *
 * @example
 * ```ts
 * import { applyHeapPolicy, withDefaultFlags } from "./heapPolicy.js"
 * const loaded = loadScript(boot, { dirs, compiled: () => applyHeapPolicy(process.env) })
 * withDefaultFlags(loaded.persist) // the cache a start with no flags can take
 * ```
 */
import { PerformanceObserver } from "node:perf_hooks"
import * as v8 from "node:v8"

/** Semi-space size (each of the two) past which the young generation no longer grows. */
export const SEMI_SPACE_CAP = 8 * 1024 * 1024
/** Growth of the old generation between full collections, in percent of what the last one kept. */
export const OLD_GROWTH_PERCENT = 100

/**
 * Node's built-in modules a session loads (`NODE_DEBUG_NATIVE=CODE_CACHE muse run …` lists them),
 * loaded before the policy's flags are set so that they compile from Node's code cache.
 */
export const SESSION_BUILTINS: ReadonlyArray<string> = [
  "node:child_process",
  "node:diagnostics_channel",
  "node:dgram",
  "node:fs/promises",
  "node:http",
  "node:https",
  "node:net",
  "node:os",
  "node:readline",
  "node:readline/promises",
  "node:tls"
]

/** Flags of Node's (or V8's) that size the heap: the user chose, the policy stays out. */
const HEAP_FLAG =
  /(?:^|\s)--?[\w-]*(?:semi[-_]space|heap[-_]growing|young[-_]generation|new[-_]space|optimize[-_]for[-_]size|heap[-_]size)/

/**
 * Whether Node was given a flag that sizes the young generation or paces collections (then the
 * user chose, and the policy stays out). `--max-old-space-size` (a limit, common in `NODE_OPTIONS`)
 * does neither.
 */
export const heapFlagsGiven = (env: NodeJS.ProcessEnv, execArgv: ReadonlyArray<string>): boolean =>
  HEAP_FLAG.test([...execArgv, env.NODE_OPTIONS ?? ""].join(" "))

let applied = false

/**
 * Sets the policy (once per process); false when it is off (`MUSE_HEAP_POLICY=0`, or heap flags
 * given to Node).
 */
export const applyHeapPolicy = (
  env: NodeJS.ProcessEnv,
  execArgv: ReadonlyArray<string> = process.execArgv
): boolean => {
  if (applied) return true
  if (env.MUSE_HEAP_POLICY === "0") return false
  if (heapFlagsGiven(env, execArgv)) return false
  applied = true
  // a flag changed at run time also makes V8 reject Node's own code cache of every built-in module
  // loaded from then on: load the ones a session uses now, while their cache is still taken
  const builtin = (process as { getBuiltinModule?: (id: string) => unknown }).getBuiltinModule
  if (builtin !== undefined) for (const id of SESSION_BUILTINS) builtin(id)
  v8.setFlagsFromString(`--heap-growing-percent=${OLD_GROWTH_PERCENT}`)
  // the young generation grows by doubling after collections where much survived: stop it
  // once the semi-spaces reach the cap (checked now, then after each collection until they do)
  if (capYoung()) return true
  const observer = new PerformanceObserver(() => {
    if (capYoung()) observer.disconnect()
  })
  observer.observe({ entryTypes: ["gc"] })
  return true
}

/** Both semi-spaces, as committed now. */
export const youngCommitted = (): number =>
  v8.getHeapSpaceStatistics().find((s) => s.space_name === "new_space")?.space_size ?? 0

let capped = false

const capYoung = (): boolean => {
  if (youngCommitted() < 2 * SEMI_SPACE_CAP) return false
  v8.setFlagsFromString("--semi-space-growth-factor=1")
  capped = true
  return true
}

/**
 * Runs `f` under V8's default heap flags (for a code cache that a start without the policy's flags
 * takes), then sets the policy's again.
 */
export const withDefaultFlags = <A>(f: () => A): A => {
  if (!applied) return f()
  const young = capped
  v8.setFlagsFromString("--heap-growing-percent=0")
  if (young) v8.setFlagsFromString("--semi-space-growth-factor=2")
  try {
    return f()
  } finally {
    v8.setFlagsFromString(`--heap-growing-percent=${OLD_GROWTH_PERCENT}`)
    if (young) v8.setFlagsFromString("--semi-space-growth-factor=1")
  }
}
