/**
 * Many sessions in one Postgres log, run by several `muse` processes at once, killed with SIGKILL
 * at random moments until every session has ended. Each session (a scripted model, a repository
 * of its own) appends to a file with a shell command, writes a file, appends again, then answers.
 * A killed run is taken over by a new process (`muse resume`) that only shares the database with
 * it (another state directory and HOME). At the end every session finished, each shell append
 * happened exactly once or is recorded as interrupted (and then happened at most once), the
 * written file is there, each log is gapless, and `muse replay --verify` passes for each from
 * the database.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { EventLogPg } from "@musekit/pg"
import { TestPostgres } from "@musekit/pg/testing"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { bin, buggyRepo, ensureBuilt, muse, type Sandbox, sandbox, writeScript } from "./support/cli.js"

const { skip } = TestPostgres.decide()
const SESSIONS = Number(process.env.FLEET_SESSIONS ?? 20)
const SLOTS = 3
const KILLS = Number(process.env.FLEET_KILLS ?? 20)

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

interface Job {
  readonly n: number
  readonly repo: string
  session: string | undefined
  runs: number
  done: boolean
}

interface Proc {
  readonly job: Job
  readonly child: ChildProcess
  /** The task's `user.input` event was printed: the session and its task are in the database. */
  started: boolean
  /** The run found the session still held (the killed process's connection not yet dropped). */
  locked: boolean
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  readonly stderr: () => string
}

describe.skipIf(skip !== undefined)(
  `many sessions in Postgres under SIGKILL${skip ? ` (skipped: ${skip})` : ""}`,
  () => {
    let server: TestPostgres.Server | undefined
    beforeAll(async () => {
      ensureBuilt()
      server = await TestPostgres.start()
    }, 240_000)
    afterAll(async () => {
      await server?.stop()
    })

    it(`${SESSIONS} sessions, ${SLOTS} processes at a time, ${KILLS} SIGKILLs: every session ends, effects once, replay --verify passes`, async () => {
      const url = server!.url
      // each process gets a sandbox of its own: only the database is shared
      const sandboxes: Array<Sandbox> = []
      const fresh = () => {
        const sb = sandbox({ MUSE_LOG: url })
        sandboxes.push(sb)
        return sb
      }
      const home = fresh()
      const append = (word: string) => ({ name: "run_shell", params: { command: `echo ${word} >> effects.txt` } })
      const script = {
        replies: [
          {
            when: "fleet",
            steps: [
              { text: "Append one.", delayMs: 150, tools: [append("one")] },
              {
                text: "Write notes.",
                delayMs: 150,
                tools: [{ name: "write_file", params: { path: "notes.txt", content: "notes\n" } }]
              },
              { text: "Append two.", delayMs: 150, tools: [append("two")] },
              { text: "Finished.", delayMs: 150 }
            ]
          }
        ]
      }
      const jobs: Array<Job> = Array.from({ length: SESSIONS }, (_, n) => ({
        n,
        repo: buggyRepo(home.root),
        session: undefined,
        runs: 0,
        done: false
      }))
      const launch = (job: Job): Proc => {
        const sb = fresh()
        const scriptFile = writeScript(sb, "fleet", script)
        job.runs++
        const args = job.session
          ? ["resume", job.session, "--script", scriptFile, "--output-format", "stream-json"]
          : ["run", "fleet work", "--script", scriptFile, "--approval-mode", "auto", "--output-format", "stream-json"]
        const child = spawn(process.execPath, [bin, ...args], {
          cwd: job.repo,
          env: sb.env,
          stdio: ["ignore", "pipe", "pipe"]
        })
        let err = ""
        let buf = ""
        const p: Proc = {
          job,
          child,
          started: job.session !== undefined,
          locked: false,
          exited: new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal }))),
          stderr: () => err
        }
        child.stderr!.setEncoding("utf8").on("data", (d: string) => (err += d))
        child.stdout!.setEncoding("utf8").on("data", (d: string) => {
          buf += d
          for (let nl = buf.indexOf("\n"); nl !== -1; nl = buf.indexOf("\n")) {
            const line = buf.slice(0, nl)
            buf = buf.slice(nl + 1)
            if (!line.startsWith("{")) continue
            const o = JSON.parse(line)
            if (o.kind === "session") job.session ??= o.session
            if (o.kind === "event" && o.event.type === "user.input") p.started = true
            if (o.kind === "result" && o.status === "completed") job.done = true
            // killed after its last event was stored: the resume finds the session complete (the
            // checks at the end read its log)
            if (o.kind === "result" && o.status === "nothing to resume") job.done = true
            if (o.kind === "result" && /is in use/.test(o.reason ?? "")) p.locked = true
          }
        })
        return p
      }

      const queue = [...jobs]
      const running = new Set<Proc>()
      let kills = 0
      const deadline = Date.now() + 900_000
      while ((queue.length > 0 || running.size > 0) && Date.now() < deadline) {
        while (running.size < SLOTS && queue.length > 0) running.add(launch(queue.shift()!))
        await sleep(100 + Math.random() * 400)
        // a random process whose session and task are in the database dies (one killed before its
        // task was recorded is started again as a new run)
        const killable = [...running].filter((p) => p.started && p.child.exitCode === null)
        if (kills < KILLS && killable.length > 0 && Math.random() < 0.6) {
          const victim = killable[Math.floor(Math.random() * killable.length)]!
          victim.child.kill("SIGKILL")
          kills++
        }
        for (const p of [...running]) {
          if (p.child.exitCode === null && p.child.signalCode === null) continue
          const exit = await p.exited
          running.delete(p)
          if (exit.signal === "SIGKILL") {
            if (!p.started) p.job.session = undefined
            queue.push(p.job)
          } else if (p.locked) {
            queue.push(p.job)
          } else {
            expect(
              exit.code === 0 || (exit.code === 4 && p.job.done),
              `session ${p.job.session} (run ${p.job.runs}) exit ${exit.code}: ${p.stderr()}`
            ).toBe(true)
            expect(p.job.done).toBe(true)
          }
        }
      }
      for (const p of running) p.child.kill("SIGKILL")
      expect(queue.length + running.size, "sessions left when time ran out").toBe(0)
      expect(kills).toBeGreaterThan(0)

      const store = (f: (s: import("@musekit/core").EventLog.StoreService) => Effect.Effect<any, any>) =>
        Effect.runPromise(Effect.scoped(Effect.flatMap(EventLogPg.storeAt(url), f)))
      let interrupted = 0
      for (const job of jobs) {
        expect(job.done, `session ${job.n}`).toBe(true)
        const events = (await store((s) => s.read(job.session!))) as Array<any>
        expect(
          events.findIndex((e, i) => e.seq !== i),
          `gapless ${job.session}`
        ).toBe(-1)
        expect(events.filter((e) => e.type === "turn.completed").at(-1)?.data.text).toBe("Finished.")
        const effects = fs.existsSync(path.join(job.repo, "effects.txt"))
          ? fs.readFileSync(path.join(job.repo, "effects.txt"), "utf8").split("\n").filter(Boolean)
          : []
        for (const word of ["one", "two"]) {
          const started = events.filter(
            (e) => e.type === "tool.started" && JSON.stringify(e.data).includes(`echo ${word} >> effects.txt`)
          )
          expect(started, `${job.session}: ${word} started once`).toHaveLength(1)
          const completed = events.filter(
            (e) => e.type === "tool.completed" && e.data.callId === started[0].data.callId
          )
          expect(completed, `${job.session}: ${word} completed once`).toHaveLength(1)
          const times = effects.filter((l) => l === word).length
          if (JSON.stringify(completed[0].data).includes("interrupted: the session stopped")) {
            interrupted++
            expect(times, `${job.session}: interrupted ${word}`).toBeLessThanOrEqual(1)
          } else {
            expect(times, `${job.session}: ${word} ran exactly once`).toBe(1)
          }
        }
        expect(fs.readFileSync(path.join(job.repo, "notes.txt"), "utf8")).toBe("notes\n")
        const v = muse(["replay", job.session!, "--verify"], { sb: fresh(), cwd: job.repo })
        expect(v.stderr, job.session).toContain(
          `verified: ${events.length} of ${events.length} events replayed exactly`
        )
        expect(v.code).toBe(0)
      }
      process.stdout.write(
        `fleet: ${SESSIONS} sessions, ${jobs.reduce((n, j) => n + j.runs, 0)} processes, ${kills} SIGKILLs, ` +
          `${interrupted} shell appends recorded as interrupted\n`
      )
      for (const sb of sandboxes) fs.rmSync(sb.root, { recursive: true, force: true })
    }, 600_000)
  }
)
