/**
 * Sessions on a cluster of three `muse runner` processes sharing one Postgres database, runners
 * killed with SIGKILL at random moments and started again until every session has ended. Each
 * session (`muse submit`, a scripted model, a repository of its own) appends to a file outside its
 * workspace with a shell command, writes a file, appends again, then answers. A killed runner's
 * shards move to the live runners, which rebuild the workspace (a fresh clone at the base commit,
 * the recorded file changes put back) and resume the session from the log. At the end every
 * session finished, each shell append happened exactly once or is recorded as interrupted (and
 * then happened at most once), each log is gapless, and `muse replay --verify` passes for each
 * from the database.
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
const SESSIONS = Number(process.env.CLUSTER_SESSIONS ?? 20)
const RUNNERS = 3
/** Milliseconds between two runner kills: random in this range, until every session has ended. */
const KILL_EVERY: readonly [number, number] = [2000, 8000]

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

describe.skipIf(skip !== undefined)(`sessions on a cluster of runners${skip ? ` (skipped: ${skip})` : ""}`, () => {
  let server: TestPostgres.Server | undefined
  const runners: Array<{ child: ChildProcess; log: string }> = []
  let logs = ""
  beforeAll(async () => {
    ensureBuilt()
    server = await TestPostgres.start()
  }, 240_000)
  afterAll(async () => {
    for (const r of runners) if (r.child.exitCode === null) r.child.kill("SIGKILL")
    await server?.stop()
  })

  it(`${SESSIONS} sessions, ${RUNNERS} runners killed with SIGKILL at random moments until all end: every session ends, effects once, replay --verify passes`, async () => {
    const url = server!.url
    const sb: Sandbox = sandbox({
      MUSE_LOG: url,
      // lock refreshes that a loaded machine keeps up with (a late one makes the runner drop its shards)
      MUSE_CLUSTER_LOCK_REFRESH_MS: "3000",
      MUSE_CLUSTER_LOCK_EXPIRATION_MS: "15000",
      MUSE_CLUSTER_POLL_MS: "500"
    })
    const effects = path.join(sb.root, "effects")
    fs.mkdirSync(effects)
    const basePort = 35000 + Math.floor(Math.random() * 2000)
    // a runner started again comes back at a new address, as a replacement machine would
    const portOf = new Map<number, number>()
    let nextPort = basePort
    const start = (i: number) => {
      const port = nextPort++
      portOf.set(port, i)
      const r = {
        child: spawn(
          process.execPath,
          [bin, "runner", "--port", String(port), "--work-dir", path.join(sb.root, `runner-${i}`)],
          { env: sb.env, stdio: ["ignore", "pipe", "pipe"] }
        ),
        log: ""
      }
      // the runner's own lines (stderr) and the cluster's log lines (stdout)
      for (const stream of [r.child.stderr!, r.child.stdout!]) {
        stream.setEncoding("utf8").on("data", (d: string) => {
          r.log += d
          logs += d
        })
      }
      runners[i] = r
    }
    for (let i = 0; i < RUNNERS; i++) start(i)

    const append = (file: string, word: string) => ({
      name: "run_shell",
      params: { command: `echo ${word} >> ${file}` }
    })
    const jobs = Array.from({ length: SESSIONS }, (_, n) => {
      const file = path.join(effects, `${n}.txt`)
      const script = writeScript(sb, `cluster-${n}`, {
        replies: [
          {
            when: "cluster",
            steps: [
              { text: "Append one.", delayMs: 2500, tools: [append(file, "one")] },
              {
                text: "Write notes.",
                delayMs: 2500,
                tools: [{ name: "write_file", params: { path: "notes.txt", content: "notes\n" } }]
              },
              { text: "Append two.", delayMs: 2500, tools: [append(file, "two")] },
              { text: "Finished.", delayMs: 2500 }
            ]
          }
        ]
      })
      return { n, file, repo: buggyRepo(sb.root), script, session: "" }
    })
    // submitted from several processes at once, as users would
    await Promise.all(
      jobs.map(async (job) => {
        const args = ["submit", "cluster work", "--repo", job.repo, "--approval-mode", "auto", "--sandbox", "off"]
        const child = spawn(process.execPath, [bin, ...args, "--script", job.script], {
          cwd: sb.root,
          env: sb.env,
          stdio: ["ignore", "pipe", "pipe"]
        })
        let out = ""
        let err = ""
        child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d))
        child.stderr!.setEncoding("utf8").on("data", (d: string) => (err += d))
        const code = await new Promise<number | null>((resolve) => child.on("exit", resolve))
        expect(code, err).toBe(0)
        job.session = out.trim()
        expect(job.session).toMatch(/^[A-Za-z0-9._-]+$/)
      })
    )

    const store = <A>(f: (s: import("@musekit/core").EventLog.StoreService) => Effect.Effect<A, any>) =>
      Effect.runPromise(Effect.scoped(Effect.flatMap(EventLogPg.storeAt(url), f)))
    const finished = async () => {
      let n = 0
      for (const job of jobs) {
        const events = await store((s) => s.read(job.session)).catch(() => [] as Array<any>)
        if ((events as Array<any>).some((e) => e.type === "turn.completed" && e.agent === "main")) n++
      }
      return n
    }
    let kills = 0
    const killDelay = () => KILL_EVERY[0] + Math.random() * (KILL_EVERY[1] - KILL_EVERY[0])
    let nextKill = Date.now() + killDelay()
    const deadline = Date.now() + 480_000
    let done = 0
    while (Date.now() < deadline) {
      done = await finished()
      if (done === SESSIONS) break
      await sleep(500 + Math.random() * 1000)
      if (Date.now() >= nextKill) {
        // a runner with a session running, at a random moment of it
        const busy = muse(["sessions", "--cluster", "--json"], { sb })
          .stdout.trim()
          .split("\n")
          .filter((l) => l.startsWith("{"))
          .map((l) => JSON.parse(l))
          .filter((r) => r.state === "running" && r.runner)
        // one whose task is in the log (killed before that, it is started again, not taken over)
        const recorded: Array<number> = []
        for (const r of busy) {
          const events = (await store((st) => st.read(r.session)).catch(() => [])) as Array<any>
          const i = portOf.get(Number(r.runner.split(":")[1]))
          if (events.length > 0 && i !== undefined && runners[i]!.child.exitCode === null) recorded.push(i)
        }
        if (recorded.length === 0) continue
        const i = recorded[Math.floor(Math.random() * recorded.length)]!
        runners[i]!.child.kill("SIGKILL")
        kills++
        nextKill = Date.now() + killDelay()
        await sleep(300 + Math.random() * 700)
        start(i)
      }
    }
    expect(done, `sessions finished (runner logs:\n${runners.map((r) => r.log).join("\n---\n")})`).toBe(SESSIONS)
    expect(kills).toBeGreaterThan(0)
    const takeovers = logs.match(/: taking over in /g)?.length ?? 0
    expect(takeovers, `sessions taken over by another runner (runner logs:\n${logs})`).toBeGreaterThan(0)
    // every file a session changed was put back from the log on takeover
    expect(logs).not.toMatch(/cannot put back|does not hold what/)

    const listed = muse(["sessions", "--cluster", "--json"], { sb })
    expect(listed.code, listed.stderr).toBe(0)
    const rows = listed.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l))
    for (const job of jobs) expect(rows.find((r) => r.session === job.session)).toBeDefined()

    let interrupted = 0
    for (const job of jobs) {
      const events = (await store((s) => s.read(job.session))) as Array<any>
      expect(
        events.findIndex((e, i) => e.seq !== i),
        `gapless ${job.session}`
      ).toBe(-1)
      expect(events.filter((e) => e.type === "turn.completed").at(-1)?.data.text).toBe("Finished.")
      const lines = fs.existsSync(job.file) ? fs.readFileSync(job.file, "utf8").split("\n").filter(Boolean) : []
      for (const word of ["one", "two"]) {
        const started = events.filter(
          (e) => e.type === "tool.started" && JSON.stringify(e.data).includes(`echo ${word} >>`)
        )
        expect(started, `${job.session}: ${word} started once`).toHaveLength(1)
        const completed = events.filter((e) => e.type === "tool.completed" && e.data.callId === started[0].data.callId)
        expect(completed, `${job.session}: ${word} completed once`).toHaveLength(1)
        const times = lines.filter((l) => l === word).length
        if (JSON.stringify(completed[0].data).includes("interrupted: the session stopped")) {
          interrupted++
          expect(times, `${job.session}: interrupted ${word}`).toBeLessThanOrEqual(1)
        } else {
          expect(times, `${job.session}: ${word} ran exactly once`).toBe(1)
        }
      }
      // the workspace of the runner that finished it holds the written file
      const workspaces = runners
        .map((_, i) => path.join(sb.root, `runner-${i}`, job.session, "notes.txt"))
        .filter((f) => fs.existsSync(f))
      expect(workspaces.length, `${job.session}: notes.txt in a workspace`).toBeGreaterThan(0)
      const v = muse(["replay", job.session, "--verify"], { sb, cwd: job.repo })
      expect(v.stderr, job.session).toContain(`verified: ${events.length} of ${events.length} events replayed exactly`)
      expect(v.code).toBe(0)
    }
    process.stdout.write(
      `cluster: ${SESSIONS} sessions, ${RUNNERS} runners, ${kills} SIGKILLs, ${takeovers} takeovers, ${interrupted} shell appends recorded as interrupted\n`
    )
    for (const r of runners) r.child.kill("SIGKILL")
    fs.rmSync(sb.root, { recursive: true, force: true })
  }, 660_000)
})
