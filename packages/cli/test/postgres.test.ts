/**
 * `muse --log postgres://…`: sessions kept in a real Postgres server (a private one started for
 * the test) instead of the state directory. Runs, lists, logs and replays read it; a run killed
 * with SIGKILL is resumed from it by a process with another state directory and HOME (as on
 * another machine) and every effect happens once; while one process holds a session, another is
 * refused; bad and unreachable URLs get clear errors without the password.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { EventLogPg } from "@musekit/pg"
import { TestPostgres } from "@musekit/pg/testing"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { detailsOf, summaryOf } from "./support/browser.js"
import { buggyRepo, ensureBuilt, fixScript, muse, museAsync, sandbox, writeScript } from "./support/cli.js"

const { skip } = TestPostgres.decide()

const parseLines = (text: string) =>
  text
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l))

describe.skipIf(skip !== undefined)(`muse --log postgres://…${skip ? ` (skipped: ${skip})` : ""}`, () => {
  let server: TestPostgres.Server | undefined
  let url = ""
  beforeAll(async () => {
    ensureBuilt()
    server = await TestPostgres.start()
    url = server.url
  }, 240_000)
  afterAll(async () => {
    await server?.stop()
  })

  /** The events of a session as stored in the database. */
  const readPg = (session: string) =>
    Effect.runPromise(Effect.scoped(Effect.flatMap(EventLogPg.storeAt(url), (store) => store.read(session))))

  it("run, sessions, log and replay --verify work from the database; nothing is written to the state directory", async () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "fix", fixScript())
    const r = muse(
      ["run", "fix it", "--script", script, "--approval-mode", "auto", "--output-format", "stream-json", "--log", url],
      { sb, cwd: repo }
    )
    expect(r.stderr).toBe("")
    expect(r.code).toBe(0)
    const lines = parseLines(r.stdout)
    const session = lines[0].session as string
    // where the session is kept, without the password
    expect(lines[0].log).toBe(EventLogPg.describeUrl(url))
    expect(r.stdout).not.toContain(new URL(url).password)
    expect(lines.at(-1)).toMatchObject({ kind: "result", status: "completed", exitCode: 0 })
    const stored = await readPg(session)
    expect(stored.map((e) => e.seq)).toEqual(stored.map((_, i) => i))
    expect(stored.map(({ crc: _crc, ...e }: any) => e)).toEqual(
      lines.filter((l) => l.kind === "event").map((l) => l.event)
    )
    expect(fs.existsSync(path.join(sb.state, "sessions", `${session}.jsonl`))).toBe(false)

    const list = parseLines(muse(["sessions", "--json", "--log", url], { sb, cwd: repo }).stdout)
    expect(list.find((s) => s.id === session)).toMatchObject({ title: "fix it", events: stored.length })
    const text = muse(["sessions", "--log", url], { sb, cwd: repo })
    expect(text.stdout).toContain(session)
    expect(text.stdout).not.toContain(new URL(url).password)

    const tools = muse(["log", session, "--type", "tool.started", "--log", url], { sb, cwd: repo })
    expect(tools.code).toBe(0)
    expect(tools.stdout.trim().split("\n")).toHaveLength(3)

    const v = muse(["replay", session, "--verify", "--log", url], { sb, cwd: repo })
    expect(v.stderr).toContain(`verified: ${stored.length} of ${stored.length} events replayed exactly`)
    expect(v.code).toBe(0)
    // MUSE_LOG says the same as the flag
    const viaEnv = muse(["replay", session, "--verify"], { sb, cwd: repo, env: { MUSE_LOG: url } })
    expect(viaEnv.code).toBe(0)
    // and without either, the state directory has no such session
    const local = muse(["replay", session], { sb, cwd: repo })
    expect(local.code).toBe(2)
    expect(local.stderr).toContain(`no such session: "${session}"`)

    // muse view reads it from the database as well: its timeline holds every model call and its diff
    const page = path.join(sb.root, "page.html")
    const view = muse(["view", session, "--log", url, "-o", page], { sb, cwd: repo })
    expect(view.code, view.stderr).toBe(0)
    const html = fs.readFileSync(page, "utf8")
    expect(html).not.toContain(new URL(url).password)
    const summary = summaryOf(html)
    expect(summary.meta.events).toBe(stored.length)
    const marks: Array<Array<any>> = summary.marks
    expect(marks.filter((m) => summary.kinds[m[2]] === "model")).toHaveLength(
      stored.filter((e) => e.type === "model.requested").length
    )
    const edit = marks.findIndex((m) => String(m[6]).startsWith("edit_file"))
    expect(detailsOf(html)[edit][2].find((sec: Array<string>) => sec[1] === "diff")?.[2]).toContain(
      "+export const sum = (a, b) => a + b"
    )
  }, 120_000)

  it("a run killed with SIGKILL resumes from the database in another state directory; each shell append happens once; replay --verify passes", async () => {
    const sb = sandbox({ MUSE_LOG: url })
    const repo = buggyRepo(sb.root)
    const append = (word: string) => ({ name: "run_shell", params: { command: `echo ${word} >> effects.txt` } })
    const steps = (slow: number) => ({
      replies: [
        {
          when: "append",
          steps: [
            { text: "First append.", tools: [append("one")] },
            {
              text: "Writing a file.",
              tools: [{ name: "write_file", params: { path: "notes.txt", content: "hello\n" } }]
            },
            { text: "Second append.", delayMs: slow, tools: [append("two")] },
            { text: "Done: two appends and a file." }
          ]
        }
      ]
    })
    // the first process waits at the third model call until it is killed; the one that resumes does not
    const script = writeScript(sb, "appends", steps(60_000))
    const other = sandbox({ MUSE_LOG: url })
    const otherScript = writeScript(other, "appends", steps(0))
    const p = museAsync(
      ["run", "append twice", "--script", script, "--approval-mode", "auto", "--output-format", "stream-json"],
      { sb, cwd: repo }
    )
    const session = (await p.waitForLine((l) => l.kind === "session")).session as string
    // the third model request is in flight
    await p.waitForLine((l) => l.kind === "event" && l.event.type === "model.requested" && l.event.data.messages >= 5)
    // a second process on the same session is refused while the first holds it
    const busy = muse(["resume", session, "--script", otherScript, "--output-format", "json"], { sb: other, cwd: repo })
    expect(busy.code).toBe(1)
    expect(JSON.parse(busy.stdout)).toMatchObject({ status: "failed", events: 0 })
    expect(JSON.parse(busy.stdout).reason).toContain(`session ${session} is in use`)
    p.child.kill("SIGKILL")
    expect((await p.exited).signal).toBe("SIGKILL")
    const cut = await readPg(session)
    expect(cut.some((e) => e.type === "turn.completed")).toBe(false)
    expect(fs.readFileSync(path.join(repo, "effects.txt"), "utf8")).toBe("one\n")

    // another state directory and HOME: only the database is shared
    const r = muse(["resume", session, "--script", otherScript, "--output-format", "json"], { sb: other, cwd: repo })
    expect(r.stderr).toBe("")
    expect(r.code).toBe(0)
    expect(JSON.parse(r.stdout)).toMatchObject({ session, status: "completed", text: "Done: two appends and a file." })
    expect(fs.readFileSync(path.join(repo, "effects.txt"), "utf8")).toBe("one\ntwo\n")
    expect(fs.readFileSync(path.join(repo, "notes.txt"), "utf8")).toBe("hello\n")
    const full = await readPg(session)
    expect(full.slice(0, cut.length)).toEqual(cut)
    expect(full.map((e) => e.seq)).toEqual(full.map((_, i) => i))
    const v = muse(["replay", session, "--verify"], { sb: other, cwd: repo })
    expect(v.stderr).toContain(`verified: ${full.length} of ${full.length} events replayed exactly`)
    expect(v.code).toBe(0)
  }, 120_000)

  it("a project file cannot send the logs to a database; bad and unreachable URLs are clear errors without the password", () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "fix", fixScript())
    fs.mkdirSync(path.join(repo, ".muse"), { recursive: true })
    fs.writeFileSync(path.join(repo, ".muse", "config.json"), JSON.stringify({ log: url }))
    const r = muse(
      ["run", "fix it", "--script", script, "--approval-mode", "auto", "--trust", "--output-format", "json"],
      {
        sb,
        cwd: repo
      }
    )
    expect(r.code).toBe(0)
    const out = JSON.parse(r.stdout)
    expect(out.output.join("\n")).toContain("sets log; a project cannot choose where sessions are stored")
    const session = out.session as string
    expect(fs.existsSync(path.join(sb.state, "sessions", `${session}.jsonl`))).toBe(true)

    const scheme = muse(["sessions", "--log", "mysql://u:pw@db/x"], { sb, cwd: repo })
    expect(scheme.code).toBe(2)
    expect(scheme.stderr).toContain('"mysql" logs are not supported')
    expect(scheme.stderr).not.toContain("pw@")

    const down = muse(["sessions", "--log", "postgres://muse:s3cret-pw@127.0.0.1:1/muse"], { sb, cwd: repo })
    expect(down.code).toBe(1)
    expect(down.stderr).toContain("postgres://muse@127.0.0.1:1/muse")
    expect(down.stderr).toContain("--log")
    expect(down.stderr).not.toContain("s3cret-pw")
  }, 120_000)
})
