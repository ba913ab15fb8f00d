/**
 * Durable event log (`EventLogFile`) against the floor plain `node:fs` reaches on the same disk:
 *
 * - durable appends/s and acknowledgement latency for 1 and for 16 concurrent appenders, beside
 *   write+fdatasync per event and per batch of 100 events (the same bytes, pre-encoded);
 * - open (scan + checksum verification) and fold (`read(0)`, counting events per type) of a
 *   100k-event log, beside readFileSync + split + JSON.parse + the same count.
 *
 * - durable appends/s with 16 concurrent sessions (one appender each) in the file log and in
 *   Postgres (`EventLogPg` on a private server started from the machine's PostgreSQL binaries, in
 *   the same run; skipped with the reason when there are none);
 * - takeover in Postgres: a process holding a session is killed with SIGKILL while another one
 *   waits to open it; the time from the kill until the waiter holds the session (p50/p99);
 * - takeover on a cluster: three `muse runner` processes (the built CLI) share the server; the
 *   runner running a session is killed with SIGKILL in the middle of a shell command, and the
 *   time from the kill until another runner appends the session's next event (the command settled
 *   as interrupted) is measured
 *   (p50/p99; shard lock refresh/expiration from `BENCH_CLUSTER_LOCK_REFRESH_MS` /
 *   `BENCH_CLUSTER_LOCK_EXPIRATION_MS`, 1,000 / 5,000 ms unless set);
 *
 * Run with `pnpm bench eventlog`. Figures also go to `bench/out/eventlog.json`.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Effect, type Scope, Stream } from "effect"
import { Event, type EventLog } from "../packages/core/src/index.js"
import { EventLogFile } from "../packages/node/src/index.js"
import { EventLogPg } from "../packages/pg/src/index.js"
import { TestPostgres } from "../packages/pg/src/testing.js"
import { bundle, fmtInt, fmtMs, fmtPct, median, percentile, printTable, writeFigures } from "./report.js"

export const description = "durable appends/s, ack latency and open+fold of 100k events vs plain node:fs"

const APPEND_SECONDS = Number(process.env.BENCH_APPEND_SECONDS ?? 1)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const WARMUP_SECONDS = 0.3
const FOLD_EVENTS = Number(process.env.BENCH_FOLD_EVENTS ?? 100_000)
const FOLD_RUNS = 5
const RAW_BATCH = 100

const TYPES = [
  "model.requested",
  "model.responded",
  "tool.started",
  "tool.finished",
  "approval.requested",
  "approval.decided",
  "crew.delivered",
  "crew.report",
  "file.changed",
  "user.message"
] as const

/** A typical event: a tool call record of ~250 bytes on disk. */
const appendDraft = (appender: number, i: number): Event.Draft => ({
  agent: appender === 0 ? "main" : `worker-${appender}`,
  type: TYPES[i % TYPES.length]!,
  parent: i > 0 ? `e${i - 1}` : null,
  data: { call: `call_${appender}_${i}`, tool: "read_file", args: { path: `src/module-${i % 97}.ts` }, ok: true }
})

/** The 100k-event log: mostly small events, every 20th carries ~2 KiB of text (model output). */
const foldDraft = (i: number): Event.Draft => ({
  agent: i % 3 === 0 ? "main" : `worker-${i % 5}`,
  type: TYPES[i % TYPES.length]!,
  parent: i > 0 ? `e${i - 1}` : null,
  data:
    i % 20 === 0
      ? {
          text: `Step ${i}: `.padEnd(2048, "lorem ipsum dolor sit amet "),
          usage: { inputTokens: 1200, outputTokens: 400 }
        }
      : { call: `call_${i}`, tool: "grep", args: { pattern: `needle${i % 13}`, path: "src" }, matches: i % 7 }
})

/** The exact line `EventLogFile` would store for a draft (used by the raw floor, so bytes match). */
const storedLine = (seq: number, d: Event.Draft): string =>
  `${EventLogFile.withChecksum(
    Event.encodeLine({
      v: Event.FORMAT_VERSION,
      seq,
      id: Event.idFor(seq),
      at: Date.now(),
      agent: d.agent,
      parent: d.parent ?? null,
      type: d.type,
      data: d.data
    })
  )}\n`

const tempDir = () => fs.mkdtempSync(path.join(os.tmpdir(), "muse-bench-log-"))

/** One timed run: how many events became durable, how long it took, each acknowledgement's latency. */
interface Sample {
  readonly events: number
  readonly ms: number
  readonly latencies: Array<number>
}

interface Throughput {
  /** events/s of the best round. */
  readonly perSecond: number
  /** Acknowledgement latency percentiles of the best round. */
  readonly p50Ms: number
  readonly p99Ms: number
  /** events/s of every round. */
  readonly rounds: ReadonlyArray<number>
}

// Other processes on the machine (and their disk traffic) only ever slow a round down, so the best
// round is the figure: it is the closest to what this code does on this hardware.
const best = (samples: ReadonlyArray<Sample>): Throughput => {
  const rates = samples.map((s) => (s.events / s.ms) * 1000)
  const i = rates.indexOf(Math.max(...rates))
  return {
    perSecond: rates[i]!,
    p50Ms: percentile(samples[i]!.latencies, 0.5),
    p99Ms: percentile(samples[i]!.latencies, 0.99),
    rounds: rates.map(Math.round)
  }
}

/** write + fdatasync per event, synchronously (latency = one write+fdatasync). */
const rawPerEvent = (seconds: number): Sample => {
  const dir = tempDir()
  try {
    const fd = fs.openSync(path.join(dir, "raw.jsonl"), "a", 0o600)
    const lines = Array.from({ length: 1000 }, (_, i) => Buffer.from(storedLine(i, appendDraft(0, i))))
    const latencies: Array<number> = []
    const t0 = performance.now()
    const deadline = t0 + seconds * 1000
    let n = 0
    for (let now = t0; now < deadline; n++) {
      fs.writeSync(fd, lines[n % lines.length]!)
      fs.fdatasyncSync(fd)
      const after = performance.now()
      latencies.push(after - now)
      now = after
    }
    const ms = performance.now() - t0
    fs.closeSync(fd)
    return { events: n, ms, latencies }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

/** One write + fdatasync per batch of `batch` events (latency = one batch). */
const rawBatched = (seconds: number, batch: number): Sample => {
  const dir = tempDir()
  try {
    const fd = fs.openSync(path.join(dir, "raw.jsonl"), "a", 0o600)
    const buffers = Array.from({ length: 10 }, (_, b) =>
      Buffer.from(Array.from({ length: batch }, (_, i) => storedLine(b * batch + i, appendDraft(i % 16, i))).join(""))
    )
    const latencies: Array<number> = []
    const t0 = performance.now()
    const deadline = t0 + seconds * 1000
    let batches = 0
    for (let now = t0; now < deadline; batches++) {
      fs.writeSync(fd, buffers[batches % buffers.length]!)
      fs.fdatasyncSync(fd)
      const after = performance.now()
      latencies.push(after - now)
      now = after
    }
    const ms = performance.now() - t0
    fs.closeSync(fd)
    return { events: batches * batch, ms, latencies }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

/** `appenders` fibers, each appending one event at a time and waiting for its acknowledgement. */
const logAppends = (appenders: number, seconds: number): Promise<Sample> => {
  const dir = tempDir()
  const drive = (log: EventLog.Service, ms: number, latencies: Array<number> | undefined) =>
    Effect.forEach(
      Array.from({ length: appenders }, (_, a) => a),
      (a) =>
        Effect.gen(function* () {
          const deadline = performance.now() + ms
          for (let i = 0; performance.now() < deadline; i++) {
            const t = performance.now()
            yield* log.append(appendDraft(a, i))
            latencies?.push(performance.now() - t)
          }
        }),
      { concurrency: "unbounded", discard: true }
    )
  return Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const log = yield* EventLogFile.open("bench", { dir, create: true })
        yield* drive(log, WARMUP_SECONDS * 1000, undefined)
        const latencies: Array<number> = []
        const t0 = performance.now()
        yield* drive(log, seconds * 1000, latencies)
        return { events: latencies.length, ms: performance.now() - t0, latencies }
      })
    )
  ).finally(() => fs.rmSync(dir, { recursive: true, force: true }))
}

/** `sessions` sessions of one store, each with one appender that waits for its acknowledgement. */
const sessionAppends = (
  store: Effect.Effect<EventLog.StoreService, unknown, Scope.Scope>,
  sessions: number,
  seconds: number
): Promise<Sample> => {
  const run = `r${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`
  return Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const s = yield* store
        const logs = yield* Effect.forEach(
          Array.from({ length: sessions }, (_, a) => a),
          (a) => s.open(`${run}-${a}`, { create: true }),
          { concurrency: "unbounded" }
        )
        const drive = (ms: number, latencies: Array<number> | undefined) =>
          Effect.forEach(
            logs,
            (log, a) =>
              Effect.gen(function* () {
                const deadline = performance.now() + ms
                for (let i = 0; performance.now() < deadline; i++) {
                  const t = performance.now()
                  yield* log.append(appendDraft(a, i))
                  latencies?.push(performance.now() - t)
                }
              }),
            { concurrency: "unbounded", discard: true }
          )
        yield* drive(WARMUP_SECONDS * 1000, undefined)
        const latencies: Array<number> = []
        const t0 = performance.now()
        yield* drive(seconds * 1000, latencies)
        return { events: latencies.length, ms: performance.now() - t0, latencies }
      })
    )
  )
}

const TAKEOVERS = Number(process.env.BENCH_TAKEOVERS ?? 20)

/**
 * Holder process (`--holder <url> <session>`): opens the session as soon as it is free (trying
 * again every 2 ms while another process holds it), prints `open`, then appends an event every
 * 20 ms until it is killed.
 */
const holder = (url: string, session: string) =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const store = yield* EventLogPg.storeAt(url, { maxConnections: 2 })
        let log: EventLog.Service | undefined
        while (!log) {
          const opened = yield* Effect.either(store.open(session, { create: true }))
          if (opened._tag === "Right") log = opened.right
          else if (opened.left._tag === "SessionLocked") yield* Effect.sleep("2 millis")
          else return yield* opened.left
        }
        process.stdout.write("open\n")
        for (let i = 0; ; i++) {
          yield* log.append(appendDraft(0, i))
          yield* Effect.sleep("20 millis")
        }
      })
    ) as Effect.Effect<void, unknown>
  )

/** Kill the process holding a session `n` times; how long until a waiting process held it, each time. */
const takeovers = async (url: string, n: number): Promise<Array<number>> => {
  const file = await bundle(fileURLToPath(import.meta.url), "eventlog")
  const session = `takeover-${Date.now().toString(36)}`
  interface Holder {
    readonly child: ChildProcess
    opened: number | undefined
    readonly exited: Promise<void>
  }
  const all: Array<Holder> = []
  let wake: () => void = () => {}
  const launch = (): Holder => {
    const child = spawn(process.execPath, [file, "--holder", url, session], { stdio: ["ignore", "pipe", "inherit"] })
    const h: Holder = { child, opened: undefined, exited: new Promise((r) => child.on("exit", () => r())) }
    child.stdout!.setEncoding("utf8").on("data", (d: string) => {
      if (h.opened === undefined && d.includes("open")) {
        h.opened = performance.now()
        wake()
      }
    })
    all.push(h)
    return h
  }
  const until = (cond: () => boolean) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("takeover: no process opened the session within 120 s")), 120_000)
      const check = () => {
        if (!cond()) return
        clearTimeout(timer)
        resolve()
      }
      wake = check
      check()
    })
  const times: Array<number> = []
  try {
    let current = launch()
    await until(() => current.opened !== undefined)
    for (let i = 0; i < n; i++) {
      const waiter = launch()
      // the waiter is up and trying (its store is open) before the holder dies
      await new Promise((r) => setTimeout(r, 1000))
      const killedAt = performance.now()
      current.child.kill("SIGKILL")
      await until(() => waiter.opened !== undefined)
      times.push(waiter.opened! - killedAt)
      await current.exited
      current = waiter
    }
  } finally {
    for (const h of all) if (h.child.exitCode === null && h.child.signalCode === null) h.child.kill("SIGKILL")
    await Promise.all(all.map((h) => h.exited))
  }
  return times
}

const CLUSTER_TAKEOVERS = Number(process.env.BENCH_CLUSTER_TAKEOVERS ?? 8)
const CLUSTER_LOCK_REFRESH_MS = Number(process.env.BENCH_CLUSTER_LOCK_REFRESH_MS ?? 1000)
const CLUSTER_LOCK_EXPIRATION_MS = Number(process.env.BENCH_CLUSTER_LOCK_EXPIRATION_MS ?? 5000)
const CLI = fileURLToPath(new URL("../packages/cli/dist/bin.js", import.meta.url))

/**
 * Three runners; `n` times: submit a session that runs a long shell command, kill the runner
 * running it (SIGKILL) and time until another runner appends the session's next event.
 * The killed runner is started again at a new address, as a replacement machine would be.
 */
const clusterTakeovers = async (url: string, n: number): Promise<Array<number> | string> => {
  if (!fs.existsSync(CLI)) return "the CLI is not built (npm run setup)"
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "muse-bench-cluster-"))
  const env: NodeJS.ProcessEnv = {}
  for (const [k, v] of Object.entries(process.env)) if (!/API_KEY|BASE_URL|TOKEN|^MUSE_/.test(k)) env[k] = v
  Object.assign(env, {
    HOME: path.join(root, "home"),
    MUSE_HOME: path.join(root, "state"),
    MUSE_SCRIPT_DIR: root,
    MUSE_LOG: url,
    MUSE_CLUSTER_LOCK_REFRESH_MS: String(CLUSTER_LOCK_REFRESH_MS),
    MUSE_CLUSTER_LOCK_EXPIRATION_MS: String(CLUSTER_LOCK_EXPIRATION_MS),
    MUSE_CLUSTER_POLL_MS: "250",
    NO_COLOR: "1"
  })
  fs.mkdirSync(env.HOME!, { recursive: true })
  const repo = path.join(root, "repo")
  fs.mkdirSync(repo)
  fs.writeFileSync(path.join(repo, "a.txt"), "a\n")
  const git = (...args: Array<string>) =>
    execFileSync("git", ["-c", "user.name=Bench", "-c", "user.email=bench@example.invalid", ...args], { cwd: repo })
  git("init", "-q", "-b", "main")
  git("add", ".")
  git("commit", "-q", "-m", "a")
  const script = path.join(root, "wait.json")
  fs.writeFileSync(
    script,
    JSON.stringify({
      replies: [
        {
          when: "takeover",
          steps: [
            { text: "Waiting.", tools: [{ name: "run_shell", params: { command: "sleep 60" } }] },
            { text: "Done." }
          ]
        }
      ]
    })
  )
  interface Runner {
    readonly child: ChildProcess
    readonly port: number
    readonly exited: Promise<void>
  }
  const runners: Array<Runner> = []
  let nextPort = 36000 + Math.floor(Math.random() * 2000)
  const start = (i: number) => {
    const port = nextPort++
    const child = spawn(
      process.execPath,
      [CLI, "runner", "--port", String(port), "--work-dir", path.join(root, `runner-${i}-${port}`)],
      { env, stdio: ["ignore", "ignore", "ignore"] }
    )
    runners[i] = { child, port, exited: new Promise((r) => child.on("exit", () => r())) }
  }
  const cli = (args: Array<string>) => {
    const r = spawnSync(process.execPath, [CLI, ...args], { env, cwd: root, encoding: "utf8" })
    if (r.status !== 0) throw new Error(`muse ${args.join(" ")}: ${r.stderr}`)
    return r.stdout
  }
  const store = <A>(f: (s: EventLog.StoreService) => Effect.Effect<A, unknown>) =>
    Effect.runPromise(Effect.scoped(Effect.flatMap(EventLogPg.storeAt(url), f)))
  const countEvents = (session: string) =>
    store((s) => s.read(session)).then(
      (events) => events as ReadonlyArray<{ readonly type: string }>,
      () => [] as ReadonlyArray<{ readonly type: string }>
    )
  const until = async <A>(what: string, f: () => Promise<A | undefined>, ms = 120_000): Promise<A> => {
    const deadline = Date.now() + ms
    while (Date.now() < deadline) {
      const a = await f()
      if (a !== undefined) return a
      await new Promise((r) => setTimeout(r, 50))
    }
    throw new Error(`cluster takeover: ${what} within ${ms / 1000} s`)
  }
  const times: Array<number> = []
  try {
    for (let i = 0; i < 3; i++) start(i)
    for (let k = 0; k < n; k++) {
      const args = ["submit", "takeover", "--repo", repo, "--approval-mode", "auto", "--sandbox", "off"]
      const session = cli([...args, "--script", script]).trim()
      // running, in the middle of its shell command
      const held = await until("no runner started the session's command", async () => {
        const events = await countEvents(session)
        if (!events.some((e) => e.type === "tool.started")) return undefined
        const row = cli(["sessions", "--cluster", "--json"])
          .split("\n")
          .filter((l) => l.startsWith("{"))
          .map((l) => JSON.parse(l) as { session: string; state: string; runner?: string })
          .find((r) => r.session === session && r.state === "running" && r.runner)
        const i = runners.findIndex((r) => row?.runner?.endsWith(`:${r.port}`))
        return i >= 0 ? i : undefined
      })
      const victim = runners[held]!
      const killedAt = performance.now()
      victim.child.kill("SIGKILL")
      await victim.exited
      // the interrupted command settled by the next runner (its shard locks expire first) is the next event
      const before = (await countEvents(session)).length
      await until("no other runner went on with the session", async () =>
        (await countEvents(session)).length > before ? true : undefined
      )
      times.push(performance.now() - killedAt)
      start(held)
    }
  } finally {
    for (const r of runners) if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill("SIGKILL")
    await Promise.all(runners.map((r) => r.exited))
    fs.rmSync(root, { recursive: true, force: true })
  }
  return times
}

const writeFoldLog = (dir: string, n: number) =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const log = yield* EventLogFile.open("fold", { dir, create: true })
        for (let from = 0; from < n; from += 1000) {
          yield* log.appendAll(Array.from({ length: Math.min(1000, n - from) }, (_, i) => foldDraft(from + i)))
        }
      })
    )
  )

type Counts = Record<string, number>

const logOpenFold = (dir: string) =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const t0 = performance.now()
        const log = yield* EventLogFile.open("fold", { dir })
        const t1 = performance.now()
        const counts = yield* Stream.runFold(log.read(0), {} as Counts, (acc, e) => {
          acc[e.type] = (acc[e.type] ?? 0) + 1
          return acc
        })
        const t2 = performance.now()
        return { openMs: t1 - t0, foldMs: t2 - t1, counts }
      })
    )
  )

const rawReadFold = (file: string) => {
  const t0 = performance.now()
  const text = fs.readFileSync(file, "utf8")
  const counts: Counts = {}
  for (const line of text.split("\n")) {
    if (line.length === 0) continue
    const e = JSON.parse(line) as { type: string }
    counts[e.type] = (counts[e.type] ?? 0) + 1
  }
  return { ms: performance.now() - t0, counts }
}

const sameCounts = (a: Counts, b: Counts) =>
  Object.keys(a).length === Object.keys(b).length && Object.entries(a).every(([k, v]) => b[k] === v)

export const run = async (): Promise<void> => {
  // Appends. The cases take turns, round after round, so that a disk or CPU that is busier for a
  // while (other processes) weighs on all of them alike; the best round of each is reported.
  rawPerEvent(WARMUP_SECONDS)
  const samples = { raw1: [] as Array<Sample>, rawB: [] as Array<Sample>, log1: [] as Array<Sample> }
  const concurrent = { log16: [] as Array<Sample>, log100: [] as Array<Sample> }
  const across = { file: [] as Array<Sample>, pg: [] as Array<Sample> }
  const pgFound = TestPostgres.availability()
  const pgSkip = pgFound._tag === "missing" ? pgFound.reason : undefined
  const pgServer = pgSkip === undefined ? await TestPostgres.start() : undefined
  const fileDir = tempDir()
  for (let r = 0; r < ROUNDS; r++) {
    samples.raw1.push(rawPerEvent(APPEND_SECONDS))
    samples.rawB.push(rawBatched(APPEND_SECONDS, RAW_BATCH))
    samples.log1.push(await logAppends(1, APPEND_SECONDS))
    concurrent.log16.push(await logAppends(16, APPEND_SECONDS))
    concurrent.log100.push(await logAppends(100, APPEND_SECONDS))
    across.file.push(await sessionAppends(Effect.succeed(EventLogFile.makeStore({ dir: fileDir })), 16, APPEND_SECONDS))
    if (pgServer) across.pg.push(await sessionAppends(EventLogPg.storeAt(pgServer.url), 16, APPEND_SECONDS))
  }
  fs.rmSync(fileDir, { recursive: true, force: true })
  const takeoverMs = pgServer ? await takeovers(pgServer.url, TAKEOVERS) : []
  const cluster = pgServer
    ? await clusterTakeovers(pgServer.url, CLUSTER_TAKEOVERS).finally(() => pgServer.stop())
    : (pgSkip ?? "no Postgres")
  const file16 = best(across.file)
  const pg16 = pgServer ? best(across.pg) : undefined
  const raw1 = best(samples.raw1)
  const rawB = best(samples.rawB)
  const log1 = best(samples.log1)
  const log16 = best(concurrent.log16)
  const log100 = best(concurrent.log100)
  // An appender waits for its acknowledgement before it appends again, so 16 appenders never have
  // more than 16 events in flight: a commit carries at most 16 events, and a commit costs at least
  // one write+fdatasync (floor A). 16 × A is the most they can reach on this disk.
  const bound16 = 16 * raw1.perSecond

  const row = (name: string, t: Throughput, ratio: string) => [
    name,
    fmtInt(t.perSecond),
    fmtMs(t.p50Ms),
    fmtMs(t.p99Ms),
    ratio
  ]
  printTable(
    `Durable appends (best of ${ROUNDS} rounds of ${APPEND_SECONDS} s; latency = until acknowledged durable)`,
    ["case", "events/s", "p50", "p99", "ratio"],
    [
      row("A  raw: write+fdatasync per event", raw1, "floor A"),
      row(`B  raw: write+fdatasync per ${RAW_BATCH} events`, rawB, "floor B (latency per batch)"),
      row("EventLogFile, 1 appender", log1, `${fmtPct(log1.perSecond / raw1.perSecond)} of A`),
      row(
        "EventLogFile, 16 concurrent appenders",
        log16,
        `${fmtPct(log16.perSecond / rawB.perSecond)} of B, ${fmtPct(log16.perSecond / bound16)} of 16 × A`
      ),
      row("EventLogFile, 100 concurrent appenders", log100, `${fmtPct(log100.perSecond / rawB.perSecond)} of B`)
    ]
  )
  process.stdout.write(
    `16 × A = ${fmtInt(bound16)} events/s (${fmtPct(bound16 / rawB.perSecond)} of B): the most that 16 appenders ` +
      "which each wait for their acknowledgement can reach (at most 16 events per fdatasync)\n"
  )

  printTable(
    `16 concurrent sessions, one appender each (best of ${ROUNDS} rounds of ${APPEND_SECONDS} s)`,
    ["case", "events/s", "p50", "p99", "ratio"],
    [
      row("EventLogFile, 16 sessions", file16, "baseline"),
      pg16
        ? row("EventLogPg (local server), 16 sessions", pg16, `${(pg16.perSecond / file16.perSecond).toFixed(2)}× file`)
        : ["EventLogPg, 16 sessions", "-", "-", "-", `skipped: ${pgSkip}`]
    ]
  )

  if (takeoverMs.length > 0) {
    printTable(
      `Takeover in Postgres: the process holding a session is killed (SIGKILL) while another waits (${takeoverMs.length} kills)`,
      ["case", "p50", "p99", "max"],
      [
        [
          "kill → the waiting process holds the session",
          fmtMs(percentile(takeoverMs, 0.5)),
          fmtMs(percentile(takeoverMs, 0.99)),
          fmtMs(Math.max(...takeoverMs))
        ]
      ]
    )
  }

  printTable(
    `Takeover on a cluster: the runner running a session is killed (SIGKILL); 3 runners, shard lock refresh ${fmtInt(CLUSTER_LOCK_REFRESH_MS)} ms, expiration ${fmtInt(CLUSTER_LOCK_EXPIRATION_MS)} ms`,
    ["case", "kills", "p50", "p99", "max"],
    [
      typeof cluster === "string"
        ? ["kill → another runner appends the session's next event", "-", "-", "-", `skipped: ${cluster}`]
        : [
            "kill → another runner appends the session's next event",
            String(cluster.length),
            fmtMs(percentile(cluster, 0.5)),
            fmtMs(percentile(cluster, 0.99)),
            fmtMs(Math.max(...cluster))
          ]
    ]
  )

  // Open + fold
  const dir = tempDir()
  try {
    await writeFoldLog(dir, FOLD_EVENTS)
    const file = path.join(dir, "sessions", "fold.jsonl")
    const bytes = fs.statSync(file).size
    const logRuns: Array<{ openMs: number; foldMs: number; counts: Counts }> = []
    const rawRuns: Array<{ ms: number; counts: Counts }> = []
    for (let i = 0; i < FOLD_RUNS; i++) {
      rawRuns.push(rawReadFold(file))
      logRuns.push(await logOpenFold(dir))
    }
    const events = Object.values(logRuns[0]!.counts).reduce((a, b) => a + b, 0)
    if (events !== FOLD_EVENTS || !sameCounts(logRuns[0]!.counts, rawRuns[0]!.counts)) {
      throw new Error(
        `fold mismatch: log ${JSON.stringify(logRuns[0]!.counts)} raw ${JSON.stringify(rawRuns[0]!.counts)}`
      )
    }
    const openMs = median(logRuns.map((r) => r.openMs))
    const foldMs = median(logRuns.map((r) => r.foldMs))
    const totalMs = median(logRuns.map((r) => r.openMs + r.foldMs))
    const rawMs = median(rawRuns.map((r) => r.ms))
    printTable(
      `Open + fold of ${fmtInt(FOLD_EVENTS)} events (${(bytes / 2 ** 20).toFixed(1)} MiB, median of ${FOLD_RUNS})`,
      ["case", "time", "ratio"],
      [
        ["C  raw: readFileSync + split + JSON.parse + count", fmtMs(rawMs), "floor C"],
        ["EventLogFile.open (scan + verify checksums)", fmtMs(openMs), ""],
        ["read(0) + fold (count per type)", fmtMs(foldMs), ""],
        ["EventLogFile open + fold", fmtMs(totalMs), `${(totalMs / rawMs).toFixed(2)}× C`]
      ]
    )
    printTable(
      "Aims",
      ["aim", "measured", ""],
      [
        [
          "16 appenders >= 50% of floor B",
          fmtPct(log16.perSecond / rawB.perSecond),
          log16.perSecond >= 0.5 * rawB.perSecond ? "met" : "missed"
        ],
        ["open+fold 100k <= 0.5 s", fmtMs(totalMs), totalMs <= 500 ? "met" : "missed"]
      ]
    )
    const out = writeFigures("eventlog", {
      rounds: ROUNDS,
      appendSeconds: APPEND_SECONDS,
      rawPerEvent: raw1,
      rawBatched: { ...rawB, batch: RAW_BATCH },
      log1,
      log16,
      log100,
      bound16,
      sessions16: { file: file16, pg: pg16 ?? null, pgSkipped: pgSkip ?? null },
      takeover:
        takeoverMs.length > 0
          ? {
              kills: takeoverMs.length,
              p50Ms: percentile(takeoverMs, 0.5),
              p99Ms: percentile(takeoverMs, 0.99),
              maxMs: Math.max(...takeoverMs)
            }
          : null,
      clusterTakeover:
        typeof cluster === "string"
          ? { skipped: cluster }
          : {
              kills: cluster.length,
              lockRefreshMs: CLUSTER_LOCK_REFRESH_MS,
              lockExpirationMs: CLUSTER_LOCK_EXPIRATION_MS,
              p50Ms: percentile(cluster, 0.5),
              p99Ms: percentile(cluster, 0.99),
              maxMs: Math.max(...cluster)
            },
      ratios: {
        pg16VsFile16: pg16 ? pg16.perSecond / file16.perSecond : null,
        log1VsRawPerEvent: log1.perSecond / raw1.perSecond,
        log16VsRawBatched: log16.perSecond / rawB.perSecond,
        log16VsBound: log16.perSecond / bound16,
        log100VsRawBatched: log100.perSecond / rawB.perSecond,
        openFoldVsRaw: totalMs / rawMs
      },
      fold: { events: FOLD_EVENTS, bytes, openMs, foldMs, totalMs, rawMs }
    })
    process.stdout.write(`\nfigures: ${out}\n`)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

if (process.argv.includes("--holder")) {
  const at = process.argv.indexOf("--holder")
  await holder(process.argv[at + 1]!, process.argv[at + 2]!)
}
