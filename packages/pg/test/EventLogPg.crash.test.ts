/**
 * Several writer processes share one session in Postgres, each opening it when it is free; the
 * test SIGKILLs them at random moments (mid-append, mid-commit, while holding or waiting for the
 * session) and starts new ones. At the end the log must be gapless from 0, hold every event a
 * writer was told was durable with exactly its data, and keep each writer's order — and a killed
 * writer's lock must have passed to a waiting process without anyone cleaning up after it.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { EventLogPg } from "@musekit/pg"
import { TestPostgres } from "@musekit/pg/testing"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { bundle, dropSchema } from "./support.js"

const { skip } = TestPostgres.decide()
const KILLS = Number(process.env.CRASH_KILLS ?? 30)
const WRITERS = 4

interface Writer {
  readonly name: string
  readonly child: ChildProcess
  readonly acks: Array<{ seq: number; fiber: number; k: number }>
  readonly opens: Array<number>
  readonly closes: Array<number>
  readonly closed: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  readonly stderr: () => string
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

describe.skipIf(skip !== undefined)(`EventLogPg under SIGKILL${skip ? ` (skipped: ${skip})` : ""}`, () => {
  let server: TestPostgres.Server | undefined
  let work = ""
  let writerBundle = ""
  beforeAll(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), "muse-pg-crash-"))
    ;[server, writerBundle] = await Promise.all([
      TestPostgres.start(),
      bundle(fileURLToPath(new URL("./fixtures/pg-writer.ts", import.meta.url)), work)
    ])
  }, 120_000)
  afterAll(async () => {
    await server?.stop()
    if (work) fs.rmSync(work, { recursive: true, force: true })
  })

  it(`${WRITERS} writer processes share a session through ${KILLS} SIGKILLs: gapless, nothing acknowledged lost`, async () => {
    const url = server!.url
    const schema = `k_${randomBytes(5).toString("hex")}`
    const session = "shared"
    const all: Array<Writer> = []
    let serial = 0
    const launch = (): Writer => {
      const name = `p${serial++}`
      const child = spawn(process.execPath, [writerBundle, url, schema, session, name], {
        stdio: ["pipe", "pipe", "pipe"]
      })
      const acks: Writer["acks"] = []
      const opens: Array<number> = []
      const closes: Array<number> = []
      let err = ""
      let buf = ""
      child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
        buf += chunk
        for (let nl = buf.indexOf("\n"); nl !== -1; nl = buf.indexOf("\n")) {
          const [word, a, b, c] = buf.slice(0, nl).split(" ")
          buf = buf.slice(nl + 1)
          if (word === "ack") acks.push({ seq: Number(a), fiber: Number(b), k: Number(c) })
          else if (word === "open") opens.push(performance.now())
          else if (word === "closed") closes.push(performance.now())
        }
      })
      child.stderr!.setEncoding("utf8").on("data", (c: string) => (err += c))
      child.stdin!.on("error", () => {})
      const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        child.on("close", (code, signal) => resolve({ code, signal }))
      )
      const w = { name, child, acks, opens, closes, closed, stderr: () => err }
      all.push(w)
      return w
    }
    const alive = new Set<Writer>()
    const takeovers: Array<number> = []
    try {
      for (let i = 0; i < WRITERS; i++) alive.add(launch())
      const acksNow = () => all.reduce((n, w) => n + w.acks.length, 0)
      for (let kill = 0; kill < KILLS; kill++) {
        // every round the log moves on (1 to 40 acknowledged events), so kills spread over its life
        const target = acksNow() + 1 + Math.floor(Math.random() * 40)
        const until = performance.now() + 60_000
        while (acksNow() < target && performance.now() < until) await sleep(1)
        expect(acksNow(), `no progress before kill ${kill}`).toBeGreaterThanOrEqual(target)
        // most kills hit the writer holding the session; the others one that waits for it
        const holder = [...alive].find((w) => w.opens.length > w.closes.length)
        const others = [...alive].filter((w) => w !== holder)
        const victim = holder && Math.random() < 0.7 ? holder : others[Math.floor(Math.random() * others.length)]!
        await sleep(Math.random() * 5)
        const opensBefore = new Map([...alive].map((w) => [w, w.opens.length]))
        const killedAt = performance.now()
        victim.child.kill("SIGKILL")
        const exit = await victim.closed
        const held = victim.opens.length > victim.closes.length
        expect(exit.signal, `${victim.name} ended by itself: ${victim.stderr()}`).toBe("SIGKILL")
        alive.delete(victim)
        if (held) {
          // the victim held the session: a waiting writer takes it over, nobody cleans up after the victim
          const deadline = performance.now() + 20_000
          while (performance.now() < deadline && ![...alive].some((w) => w.opens.length > opensBefore.get(w)!)) {
            await sleep(2)
          }
          const next = [...alive].flatMap((w) => w.opens.slice(opensBefore.get(w)!))
          expect(next.length, `no writer took the session over within 20 s of kill ${kill}`).toBeGreaterThan(0)
          takeovers.push(Math.min(...next) - killedAt)
        }
        alive.add(launch())
      }
      for (const w of alive) w.child.stdin!.end()
      for (const w of alive) {
        const exit = await w.closed
        expect(exit.code, w.stderr()).toBe(0)
      }
      const events = await Effect.runPromise(
        Effect.scoped(Effect.flatMap(EventLogPg.storeAt(url, { schema }), (store) => store.read(session)))
      )
      // gapless from 0
      expect(events.findIndex((e, i) => e.seq !== i)).toBe(-1)
      // every acknowledged event is there, with its writer's data
      let acked = 0
      for (const w of all) {
        for (const a of w.acks) {
          acked++
          expect(events[a.seq]?.data, `${w.name} was told seq ${a.seq} was durable`).toEqual({
            writer: w.name,
            fiber: a.fiber,
            k: a.k
          })
        }
      }
      // each writer's fibers appear in their own order, without repeats
      const nextK = new Map<string, number>()
      for (const e of events) {
        const d = e.data as { writer: string; fiber: number; k: number }
        const key = `${d.writer}/${d.fiber}`
        expect(d.k, `${key} at seq ${e.seq}`).toBe(nextK.get(key) ?? 0)
        nextK.set(key, d.k + 1)
      }
      expect(acked).toBeGreaterThan(KILLS * 10)
      expect(takeovers.length, "kills that hit the writer holding the session").toBeGreaterThan(0)
      takeovers.sort((a, b) => a - b)
      process.stdout.write(
        `pg crash: ${KILLS} kills, ${all.length} writers, ${events.length} events (${acked} acknowledged); ` +
          `${takeovers.length} kills of the holder, taken over after p50 ${takeovers[Math.floor(takeovers.length / 2)]!.toFixed(0)} ms, ` +
          `max ${takeovers[takeovers.length - 1]!.toFixed(0)} ms\n`
      )
    } finally {
      for (const w of all) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill("SIGKILL")
      await Promise.all(all.map((w) => w.closed))
      await Effect.runPromise(dropSchema(url, schema))
    }
  }, 300_000)
})
