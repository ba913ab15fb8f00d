/**
 * Crash safety of the durable log with real processes: writer processes are SIGKILLed at random
 * moments while they append, and after every kill the log must open, be gapless, and hold every
 * event a writer was told was durable, byte for byte.
 *
 * The writer is `fixtures/crash-writer.ts`, importing the package source by relative path. The lock
 * test runs it with `node --import tsx`. The kill loop starts dozens of writers, and under tsx each
 * start costs seconds of CPU (every module of the import graph passes through the loader hooks), so
 * there the same source is first bundled once with esbuild (the compiler tsx itself uses) and run
 * with plain `node`.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { EventLog } from "@musekit/core"
import { Effect } from "effect"
import { EventLogFile } from "../src/index.js"
import { bigRound, draft, GROUP } from "./fixtures/crash-writer.js"

const repoRoot = fileURLToPath(new URL("../../../", import.meta.url))
const fixture = fileURLToPath(new URL("./fixtures/crash-writer.ts", import.meta.url))

const KILLS = Number(process.env.CRASH_KILLS ?? 60)
const FIBERS = 4
/** Writers started ahead of time, so process start-up overlaps with the previous round. */
const WARM = 2

/** A small deterministic PRNG, so a failing schedule can be replayed with CRASH_SEED. */
const prng = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

interface Ack {
  readonly seq: number
  readonly fiber: number
  readonly k: number
}

interface Writer {
  readonly child: ChildProcess
  readonly acks: Array<Ack>
  readonly loaded: Promise<void>
  readonly ready: Promise<number>
  /** Resolves when the writer announces its first large event. */
  readonly big: Promise<void>
  /** Resolves once the process is gone and all its output has been read. */
  readonly closed: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  readonly stderr: () => string
  readonly go: (run: number) => void
}

/** How to run the writer: its TypeScript through tsx, or a prebuilt bundle of it. */
type Launch = { readonly tsx: true } | { readonly bundle: string }

interface Esbuild {
  readonly build: (options: Record<string, unknown>) => Promise<unknown>
}

/** Bundle the writer (and the source it imports) into one ES module; esbuild comes with tsx. */
const bundleWriter = async (outDir: string): Promise<string> => {
  const fromTsx = createRequire(createRequire(import.meta.url).resolve("tsx/package.json"))
  const esbuild = fromTsx("esbuild") as Esbuild
  const outfile = path.join(outDir, "crash-writer.mjs")
  await esbuild.build({
    entryPoints: [fixture],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    tsconfig: path.join(repoRoot, "tsconfig.json"),
    banner: { js: 'import { createRequire as __cr } from "node:module"; const require = __cr(import.meta.url);' },
    logLevel: "error"
  })
  return outfile
}

const startWriter = (dir: string, session: string, launch: Launch): Writer => {
  const args = "tsx" in launch ? ["--import", "tsx", fixture] : [launch.bundle]
  const child = spawn(process.execPath, [...args, dir, session, String(FIBERS)], {
    cwd: repoRoot,
    stdio: ["pipe", "pipe", "pipe"]
  })
  const acks: Array<Ack> = []
  let stderr = ""
  let pending = ""
  let onLoaded: () => void = () => {}
  let onReady: (seq: number) => void = () => {}
  let onBig: () => void = () => {}
  const loaded = new Promise<void>((resolve) => (onLoaded = resolve))
  const ready = new Promise<number>((resolve) => (onReady = resolve))
  const big = new Promise<void>((resolve) => (onBig = resolve))
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    pending += chunk
    let nl = pending.indexOf("\n")
    while (nl !== -1) {
      const line = pending.slice(0, nl)
      pending = pending.slice(nl + 1)
      nl = pending.indexOf("\n")
      const [word, a, b, c] = line.split(" ")
      if (word === "ack") acks.push({ seq: Number(a), fiber: Number(b), k: Number(c) })
      else if (word === "ready") onReady(Number(a))
      else if (word === "loaded") onLoaded()
      else if (word === "big") onBig()
    }
  })
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
  child.stdin!.on("error", () => {}) // the child may already be dead when we write or close
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("close", (code, signal) => resolve({ code, signal }))
  )
  return {
    child,
    acks,
    loaded,
    ready,
    big,
    closed,
    stderr: () => stderr,
    go: (run) => child.stdin!.write(`go ${run}\n`)
  }
}

/** Wait until the writer has loaded; fails with its stderr when it died first. */
const started = async (w: Writer) => {
  const ok = await Promise.race([w.loaded.then(() => true), w.closed.then(() => false)])
  if (!ok) throw new Error(`writer did not start: ${w.stderr()}`)
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Open the log (repairing a torn tail, taking over a stale lock) and read its events from `from` on. */
const openAndRead = (dir: string, session: string, from: number) =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        const log = yield* EventLogFile.open(session, { dir })
        return { lastSeq: yield* log.lastSeq, events: yield* EventLog.readAll(log, from) }
      })
    )
  )

const readAt = (file: string, position: number, length: number) => {
  const fd = fs.openSync(file, "r")
  try {
    const buf = Buffer.alloc(length)
    fs.readSync(fd, buf, 0, length, position)
    return buf.toString("latin1")
  } finally {
    fs.closeSync(fd)
  }
}

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), "muse-crash-"))

describe("EventLogFile under SIGKILL (real processes)", () => {
  let buildDir = ""
  let bundle = ""
  beforeAll(async () => {
    buildDir = fs.mkdtempSync(path.join(os.tmpdir(), "muse-crash-writer-"))
    bundle = await bundleWriter(buildDir)
  }, 60_000)
  afterAll(() => fs.rmSync(buildDir, { recursive: true, force: true }))

  it(`${KILLS} random kills of a writer with ${FIBERS} concurrent appenders lose no acknowledged event`, async () => {
    const seed = Number(process.env.CRASH_SEED ?? Date.now() % 1_000_000)
    const random = prng(seed)
    const dir = tmp()
    const session = "crash"
    const sessionsDir = path.join(dir, "sessions")
    const logFile = path.join(sessionsDir, `${session}.jsonl`)
    const where = (run: number) => `seed ${seed}, run ${run}`
    const pool: Array<Writer> = []
    const all: Array<Writer> = []
    const spawnOne = () => {
      const w = startWriter(dir, session, { bundle })
      pool.push(w)
      all.push(w)
    }
    /** seq → what the writers were told was durable at that seq */
    const acked = new Map<number, { run: number; fiber: number; k: number }>()
    let verified = 0
    const tornSeen = new Set<string>()
    let killedDuringOpen = 0
    let killedBeforeAck = 0
    let eventsAtEnd = 0
    let verifyMs = 0
    let waitLoadedMs = 0
    const t0 = performance.now()
    try {
      // the session exists before the first writer starts (a first kill may land before its open)
      fs.mkdirSync(sessionsDir, { recursive: true })
      fs.writeFileSync(logFile, "", { mode: 0o600 })
      for (let i = 0; i < WARM; i++) spawnOne()
      for (let run = 0; run < KILLS; run++) {
        const w = pool.shift()!
        spawnOne()
        const tl = performance.now()
        await started(w)
        waitLoadedMs += performance.now() - tl
        w.go(run)
        // Most kills land at a random moment while appends and fdatasyncs are in flight; in big
        // rounds they are aimed at the write of a large event; some land during open (scan,
        // torn-tail repair, lock take-over), before the writer reports ready.
        const duringOpen = !bigRound(run) && random() < 0.15
        if (duringOpen) {
          await sleep(random() * 12)
        } else {
          const lastSeq = await Promise.race([w.ready, w.closed.then(() => Number.NaN)])
          expect(lastSeq, `${where(run)}: writer exited before ready: ${w.stderr()}`).toBe(verified - 1)
          if (bigRound(run)) {
            // Aim at the write(2) of the large event: the file grows page by page while it runs, so
            // kill on the first jump between two stat calls that small commits cannot make.
            const announced = await Promise.race([w.big.then(() => true), sleep(2_000)])
            const deadline = performance.now() + 2_000
            for (let size = fs.statSync(logFile).size; announced && performance.now() < deadline; ) {
              const now = fs.statSync(logFile).size
              if (now - size >= 16 * 1024) break
              size = now
            }
          } else {
            await sleep(random() * 150)
          }
        }
        w.child.kill("SIGKILL")
        const exit = await w.closed
        expect(exit.signal, `${where(run)}: writer ended by itself: ${w.stderr()}`).toBe("SIGKILL")
        if (duringOpen) killedDuringOpen++
        if (w.acks.length === 0) killedBeforeAck++

        for (const a of w.acks) acked.set(a.seq, { run, fiber: a.fiber, k: a.k })

        // The log opens (a torn tail is repaired, the stale lock taken over). Every round reads the
        // events appended since the last round; every tenth round and the last one read everything.
        const full = run % 10 === 9 || run === KILLS - 1
        const from = full ? 0 : verified
        const asides = () => fs.readdirSync(sessionsDir).filter((f) => f.includes(".torn-"))
        const asidesBefore = new Set(asides())
        const sizeBefore = fs.statSync(logFile).size
        const tv = performance.now()
        const { lastSeq, events } = await openAndRead(dir, session, from)
        verifyMs += performance.now() - tv
        const at = (seq: number) => events[seq - from]
        // A repair cuts exactly the torn part and keeps it aside: the log ends with a whole line, what
        // was cut does not start with one, and log + cut = the file as the killed writer left it.
        const size = fs.statSync(logFile).size
        if (size > 0) expect(readAt(logFile, size - 1, 1), `${where(run)}: log ends mid-line`).toBe("\n")
        let cut = 0
        for (const f of asides().filter((f) => !tornSeen.has(f))) {
          tornSeen.add(f)
          const aside = fs.readFileSync(path.join(sessionsDir, f))
          if (!asidesBefore.has(f)) cut += aside.length
          const nl = aside.indexOf(10)
          const first = nl === -1 ? { bad: "no newline" } : EventLogFile.verifyLine(aside.subarray(0, nl))
          expect("bad" in first, `${where(run)}: ${f} starts with a whole, valid line`).toBe(true)
        }
        expect(size + cut, `${where(run)}: bytes lost by the repair`).toBe(sizeBefore)
        // It is gapless from 0 ...
        const gap = events.findIndex((e, i) => e.seq !== from + i)
        expect(gap, `${where(run)}: seq ${events[gap]?.seq} at position ${from + gap}`).toBe(-1)
        expect(lastSeq, where(run)).toBe(from + events.length - 1)
        // ... never shorter than what an earlier round verified ...
        expect(lastSeq + 1, where(run)).toBeGreaterThanOrEqual(verified)
        // ... and holds every acknowledged event with exactly the data its writer appended.
        for (const [seq, a] of acked) {
          if (seq < from) continue
          const e = at(seq)
          expect(e, `${where(run)}: acknowledged seq ${seq} is missing (last seq ${lastSeq})`).toBeDefined()
          const d = e!.data as { run: number; fiber: number; k: number }
          if (d.run !== a.run || d.fiber !== a.fiber || d.k !== a.k) {
            expect(d, `${where(run)}: seq ${seq} holds another event`).toMatchObject(a)
          }
        }
        // New events (acknowledged or not) are exactly what some writer appended, in append order.
        const next = new Map<string, number>()
        for (let seq = verified; seq <= lastSeq; seq++) {
          const e = at(seq)!
          const d = e.data as { run: number; fiber: number; k: number }
          const want = draft(d.run, d.fiber, d.k)
          if (e.agent !== want.agent || e.type !== want.type || JSON.stringify(d) !== JSON.stringify(want.data)) {
            expect({ agent: e.agent, type: e.type, data: d }, `${where(run)}: seq ${seq}`).toEqual(want)
          }
          const key = `${d.run}/${d.fiber}`
          const expectedK = next.get(key) ?? 0
          expect(d.k, `${where(run)}: seq ${seq} out of order for writer ${key}`).toBe(expectedK)
          next.set(key, d.k + 1)
          if (d.fiber === 0 && d.k % GROUP !== 0) {
            // the events of one appendAll are consecutive
            const prev = at(seq - 1)!.data as { run: number; fiber: number; k: number }
            expect([prev.run, prev.fiber, prev.k], `${where(run)}: appendAll group split at seq ${seq}`).toEqual([
              d.run,
              0,
              d.k - 1
            ])
          }
        }
        verified = lastSeq + 1
        eventsAtEnd = lastSeq + 1
      }
      // The lock-free reader sees the same log, and nothing but the log and torn tails were left.
      const read = await Effect.runPromise(EventLogFile.readSession(session, { dir }))
      expect(read.length).toBe(eventsAtEnd)
      const files = fs.readdirSync(sessionsDir)
      expect(files.filter((f) => !f.startsWith(`${session}.jsonl`))).toEqual([])
      expect(acked.size).toBeGreaterThan(KILLS)
      console.log(
        `crash test (seed ${seed}): ${KILLS} kills, ${eventsAtEnd} events ` +
          `(${(fs.statSync(logFile).size / 2 ** 20).toFixed(1)} MiB), ${acked.size} acknowledged, ` +
          `${tornSeen.size} torn tails repaired, ${killedDuringOpen} kills aimed at open, ` +
          `${killedBeforeAck} before any acknowledgement; ` +
          `${((performance.now() - t0) / 1000).toFixed(1)} s (open+read ${(verifyMs / 1000).toFixed(1)} s, ` +
          `waiting for writer start-up ${(waitLoadedMs / 1000).toFixed(1)} s)`
      )
    } finally {
      for (const w of all) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill("SIGKILL")
      await Promise.all(all.map((w) => w.closed))
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 180_000)

  it("a second process gets SessionLocked; after the first is SIGKILLed its stale lock is taken over", async () => {
    const dir = tmp()
    const writers: Array<Writer> = []
    const start = () => {
      const w = startWriter(dir, "locked", { tsx: true })
      writers.push(w)
      return w
    }
    try {
      const first = start()
      const second = start()
      await Promise.all([started(first), started(second)])
      first.go(0)
      expect(await first.ready).toBe(-1)
      const lockFile = path.join(dir, "sessions", "locked.lock")
      expect(fs.readFileSync(lockFile, "utf8")).toBe(String(first.child.pid))

      second.go(1)
      const refused = await second.closed
      expect(refused.code).toBe(1)
      expect(second.stderr()).toContain(
        `crash-writer failed: session locked is open for writing by process ${first.child.pid} (lock ${lockFile}); close that process first`
      )
      expect(first.child.exitCode).toBeNull() // the holder is untouched

      first.child.kill("SIGKILL")
      await first.closed
      expect(fs.readFileSync(lockFile, "utf8")).toBe(String(first.child.pid)) // left behind, now stale
      const firstAcks = first.acks.length

      const third = start()
      await started(third)
      third.go(2)
      const lastSeq = await Promise.race([third.ready, third.closed.then(() => Number.NaN)])
      expect(lastSeq, third.stderr()).toBeGreaterThanOrEqual(firstAcks - 1)
      expect(fs.readFileSync(lockFile, "utf8")).toBe(String(third.child.pid))
      third.child.kill("SIGKILL")
      await third.closed
    } finally {
      for (const w of writers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill("SIGKILL")
      await Promise.all(writers.map((w) => w.closed))
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)
})

describe("a stale lock found by several processes at once", () => {
  let buildDir = ""
  let bundle = ""
  beforeAll(async () => {
    buildDir = fs.mkdtempSync(path.join(os.tmpdir(), "muse-lock-writer-"))
    bundle = await bundleWriter(buildDir)
  }, 60_000)
  afterAll(() => fs.rmSync(buildDir, { recursive: true, force: true }))

  it("is taken over by exactly one of them; the others get SessionLocked naming it", async () => {
    for (let round = 0; round < 3; round++) {
      const dir = tmp()
      const sessionsDir = path.join(dir, "sessions")
      fs.mkdirSync(sessionsDir, { recursive: true })
      fs.writeFileSync(path.join(sessionsDir, "race.jsonl"), "")
      // the pid of a process that is gone (or, in the last round, a lock left empty by a crash)
      const dead = spawnSync(process.execPath, ["-e", "0"]).pid
      const lockFile = path.join(sessionsDir, "race.lock")
      fs.writeFileSync(lockFile, round === 2 ? "" : String(dead))
      const writers = Array.from({ length: 6 }, () => startWriter(dir, "race", { bundle }))
      try {
        await Promise.all(writers.map(started))
        for (const w of writers) w.go(round)
        const outcomes = await Promise.all(
          writers.map((w) =>
            Promise.race([
              w.ready.then(() => "took it"),
              w.closed.then(() =>
                w.stderr().includes("is open for writing by process") ? "locked" : `failed: ${w.stderr()}`
              )
            ])
          )
        )
        expect(
          outcomes.filter((o) => o === "took it"),
          outcomes.join("\n")
        ).toHaveLength(1)
        expect(outcomes.filter((o) => o === "locked")).toHaveLength(5)
        const holder = writers[outcomes.indexOf("took it")]!
        expect(fs.readFileSync(lockFile, "utf8")).toBe(String(holder.child.pid))
        expect(fs.existsSync(`${lockFile}.takeover`)).toBe(false)
      } finally {
        for (const w of writers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill("SIGKILL")
        await Promise.all(writers.map((w) => w.closed))
        fs.rmSync(dir, { recursive: true, force: true })
      }
    }
  }, 120_000)
})
