/**
 * `muse rewind` and `muse fork` with the built binary: a three-turn session made in a terminal,
 * then its files taken back to a turn (and the rewind undone), a user's edit refused until
 * `--force`, and a fork that leaves its parent's log as it was; every log replays exactly.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, beforeAll, describe, expect, it } from "vitest"
import { bin, buggyRepo, ensureBuilt, muse, readLog, type Sandbox, sandbox, writeScript } from "./support/cli.js"
import { type Session, spawnInTerminal } from "./support/terminal.js"

beforeAll(() => ensureBuilt(), 240_000)

export const rewindScript = {
  replies: [
    {
      agent: "main",
      when: "first notes",
      steps: [
        {
          tools: [
            { name: "write_file", params: { path: "a.txt", content: "A one\n" } },
            { name: "write_file", params: { path: "b.txt", content: "B one\n" } }
          ]
        },
        { text: "Wrote a.txt and b.txt." }
      ]
    },
    {
      agent: "main",
      when: "second notes",
      steps: [
        {
          tools: [
            { name: "edit_file", params: { path: "a.txt", edits: [{ old_text: "A one", new_text: "A two" }] } },
            { name: "write_file", params: { path: "c.txt", content: "C two\n" } }
          ]
        },
        { text: "Changed a.txt, added c.txt." }
      ]
    },
    {
      agent: "main",
      when: "third notes",
      steps: [
        {
          tools: [
            { name: "write_file", params: { path: "b.txt", content: "B three\n" } },
            { name: "run_shell", params: { command: "echo shell > shell.txt" } }
          ]
        },
        { text: "Rewrote b.txt and ran a command." }
      ]
    },
    { agent: "main", steps: [{ text: "The session goes on from here." }] }
  ]
}

export const TURNS: ReadonlyArray<readonly [string, string]> = [
  ["write the first notes", "Wrote a.txt and b.txt."],
  ["now the second notes", "Changed a.txt, added c.txt."],
  ["and the third notes", "Rewrote b.txt and ran a command."]
]

let term: Session | undefined
afterEach(() => term?.kill())

/** A session of three turns, typed in a terminal as a person would; its id. */
export const threeTurns = async (sb: Sandbox, repo: string, script: string): Promise<string> => {
  const t = spawnInTerminal(process.execPath, [bin, "--script", script, "--approval-mode", "auto"], {
    cwd: repo,
    env: sb.env,
    cols: 100,
    rows: 30
  })
  term = t
  await t.waitFor("Type a task, or /help")
  for (const [prompt, answer] of TURNS) {
    await t.waitFor(/\n› $/m)
    t.type(`${prompt}\r`)
    await t.waitFor(answer)
  }
  await t.waitFor(/\n› $/m)
  t.type("\x04")
  expect((await t.exited).exitCode).toBe(0)
  const session = /session (\d{8}-\d{6}-[0-9a-f]{6})/.exec(t.all())![1]!
  return session
}

const read = (repo: string, f: string) =>
  fs.existsSync(path.join(repo, f)) ? fs.readFileSync(path.join(repo, f), "utf8") : null
const files = (repo: string) => ({ a: read(repo, "a.txt"), b: read(repo, "b.txt"), c: read(repo, "c.txt") })
const LATEST = { a: "A two\n", b: "B three\n", c: "C two\n" }
const AFTER_FIRST = { a: "A one\n", b: "B one\n", c: null }

const verifies = (sb: Sandbox, repo: string, session: string) => {
  const v = muse(["replay", session, "--verify"], { sb, cwd: repo })
  const n = readLog(sb, session).length
  expect(v.stderr).toContain(`verified: ${n} of ${n} events replayed exactly`)
  expect(v.code).toBe(0)
}

describe("muse rewind", () => {
  it("lists the turns without --to, rewinds to a turn, replays exactly, and --to undo comes back", async () => {
    const sb = sandbox({ TERM: "xterm-256color" })
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "rewind", rewindScript)
    const session = await threeTurns(sb, repo, script)
    expect(files(repo)).toEqual(LATEST)

    // without --to: the turns, with their prompts and the files they changed, and a non-zero exit
    const list = muse(["rewind", session], { sb, cwd: repo })
    expect(list.code).not.toBe(0)
    expect(list.stdout).toContain(`session ${session}: pick a point with --to`)
    expect(list.stdout).toMatch(/turn 1 \(seq \d+\): write the first notes — a\.txt, b\.txt/)
    expect(list.stdout).toMatch(/turn 2 \(seq \d+\): now the second notes — a\.txt, c\.txt/)
    expect(list.stdout).toMatch(/turn 3 \(seq \d+\): and the third notes — b\.txt/)
    expect(files(repo)).toEqual(LATEST)

    // before the second prompt: the files as the first turn left them; the command is named, not undone
    const r = muse(["rewind", session, "--to", "turn:2", "--script", script], { sb, cwd: repo })
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/rewound to seq \d+ \(before turn 2\): 3 files restored/)
    expect(r.stdout).toContain("not undone (their effects stay): 1 command")
    expect(r.stdout).toContain("echo shell > shell.txt")
    expect(r.stdout).toContain(`undo: muse rewind ${session} --to undo`)
    expect(files(repo)).toEqual(AFTER_FIRST)
    expect(read(repo, "shell.txt")).toBe("shell\n")
    const events = readLog(sb, session)
    const done = events.filter((e) => e.type === "rewind.completed")
    expect(done).toHaveLength(1)
    expect(done[0].data.restored.map((f: any) => f.path).sort()).toEqual(["a.txt", "b.txt", "c.txt"])
    verifies(sb, repo, session)

    // undo: back to the latest state
    const u = muse(["rewind", session, "--to", "undo", "--script", script], { sb, cwd: repo })
    expect(u.code, u.stderr).toBe(0)
    expect(files(repo)).toEqual(LATEST)
    verifies(sb, repo, session)
  }, 180_000)

  it("a file the user changed since is named and kept unless --force, and the forced rewind can be undone", async () => {
    const sb = sandbox({ TERM: "xterm-256color" })
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "rewind", rewindScript)
    const session = await threeTurns(sb, repo, script)
    fs.writeFileSync(path.join(repo, "b.txt"), "the user's own b\n")
    const before = fs.readFileSync(path.join(sb.state, "sessions", `${session}.jsonl`))

    const refused = muse(["rewind", session, "--to", "turn:2", "--script", script], { sb, cwd: repo })
    expect(refused.code).not.toBe(0)
    expect(refused.stderr).toContain("not rewound: 1 file was changed since the session last wrote it: b.txt")
    expect(refused.stderr).toContain(`muse rewind ${session} --to turn:2 --force`)
    // nothing was touched: not the files, not the log
    expect(files(repo)).toEqual({ ...LATEST, b: "the user's own b\n" })
    expect(fs.readFileSync(path.join(sb.state, "sessions", `${session}.jsonl`)).equals(before)).toBe(true)

    const forced = muse(["rewind", session, "--to", "turn:2", "--force", "--script", script], { sb, cwd: repo })
    expect(forced.code, forced.stderr).toBe(0)
    expect(files(repo)).toEqual(AFTER_FIRST)
    verifies(sb, repo, session)

    // undo brings back what the user had written, not the session's last write
    const u = muse(["rewind", session, "--to", "undo", "--script", script], { sb, cwd: repo })
    expect(u.code, u.stderr).toBe(0)
    expect(files(repo)).toEqual({ ...LATEST, b: "the user's own b\n" })
    verifies(sb, repo, session)
  }, 180_000)
})

describe("muse fork", () => {
  it("a fork at turn:2 is a new session in a worktree of its own, shown as a fork; the parent's log is untouched", async () => {
    const sb = sandbox({ TERM: "xterm-256color" })
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "rewind", rewindScript)
    const session = await threeTurns(sb, repo, script)
    const parentFile = path.join(sb.state, "sessions", `${session}.jsonl`)
    const parentBytes = fs.readFileSync(parentFile)

    const f = muse(["fork", session, "--at", "turn:2", "--json"], { sb, cwd: repo })
    expect(f.code, f.stderr).toBe(0)
    const forked = JSON.parse(f.stdout)
    expect(forked.session).not.toBe(session)
    expect(forked.worktree).toBe(true)
    expect(forked.target.turn).toBe(2)
    // the fork's checkout holds the files as they were before turn 2; the parent's are as they were
    expect(path.relative(repo, forked.root).startsWith("..")).toBe(true)
    expect(files(forked.root)).toEqual(AFTER_FIRST)
    expect(files(repo)).toEqual(LATEST)
    expect(fs.readFileSync(parentFile).equals(parentBytes)).toBe(true)

    // its log starts with the parent's events up to that point
    const parent = readLog(sb, session)
    const child = readLog(sb, forked.session)
    const cut = parent.findIndex((e) => e.seq === forked.target.seq)
    expect(cut).toBeGreaterThan(0)
    expect(child.slice(1, cut).map((e) => [e.type, e.data])).toEqual(parent.slice(1, cut).map((e) => [e.type, e.data]))

    const list = muse(["sessions"], { sb, cwd: repo })
    expect(list.code).toBe(0)
    // the fork's row, then the family on the line under it
    const rows = list.stdout.split("\n")
    const at = rows.findIndex((l) => l.startsWith(forked.session))
    expect(at).toBeGreaterThan(0)
    expect(rows[at + 1]).toBe(`  └ fork of ${session} at seq ${forked.target.seq}`)
    expect(rows.filter((l) => l.includes("fork of"))).toHaveLength(1)
    const json = muse(["sessions", "--json"], { sb, cwd: repo })
      .stdout.split("\n")
      .filter((l) => l !== "")
      .map((l) => JSON.parse(l))
    expect(json.find((r) => r.id === forked.session)?.forkOf).toEqual({ session, seq: forked.target.seq })

    verifies(sb, repo, session)
    verifies(sb, repo, forked.session)
    expect(fs.readFileSync(parentFile).equals(parentBytes)).toBe(true)

    // a bad target names the cause and makes nothing
    const bad = muse(["fork", session, "--at", "turn:9"], { sb, cwd: repo })
    expect(bad.code).not.toBe(0)
    expect(bad.stderr).toMatch(/turn/)
  }, 180_000)
})

describe("/rewind in the terminal", () => {
  it("lists the turns to pick from, asks before overwriting a file the user changed, restores the rest, and the conversation goes on from there", async () => {
    const sb = sandbox({ TERM: "xterm-256color" })
    const repo = buggyRepo(sb.root)
    const script = writeScript(sb, "rewind", rewindScript)
    const t = spawnInTerminal(process.execPath, [bin, "--script", script, "--approval-mode", "auto"], {
      cwd: repo,
      env: sb.env,
      cols: 100,
      rows: 40
    })
    term = t
    await t.waitFor("Type a task, or /help")
    for (const [prompt, answer] of TURNS) {
      await t.waitFor(/\n› $/m)
      t.type(`${prompt}\r`)
      await t.waitFor(answer)
    }
    await t.waitFor(/\n› $/m)
    const session = /session (\d{8}-\d{6}-[0-9a-f]{6})/.exec(t.all())![1]!
    expect(files(repo)).toEqual(LATEST)
    // someone else changes b.txt meanwhile
    fs.writeFileSync(path.join(repo, "b.txt"), "the user's own b\n")

    t.type("/rewind\r")
    await t.waitFor("rewind to just before a turn")
    let all = t.all()
    expect(all).toMatch(/\[1\] turn 1 \(seq \d+\): write the first notes — a\.txt, b\.txt/)
    expect(all).toMatch(/\[2\] turn 2 \(seq \d+\): now the second notes — a\.txt, c\.txt/)
    expect(all).toMatch(/\[3\] turn 3 \(seq \d+\): and the third notes — b\.txt/)
    // the keys work once the question has been on screen for a moment
    await t.waitFor("which turn? (enter: 3)")
    t.type("2\r")

    // b.txt was changed by someone else: overwrite or keep?
    await t.waitFor("changed since the session last wrote it, by someone else:")
    expect(t.all()).toMatch(/^ {4}b\.txt$/m)
    await t.waitFor("[k] keep them (rewind the rest)  [o] overwrite them")
    expect(files(repo)).toEqual({ ...LATEST, b: "the user's own b\n" })
    t.type("k")
    await t.waitFor(/› \/rewind turn:2\s*$/m)
    await t.waitFor("undo with: /rewind undo")
    all = t.all()
    expect(all).toMatch(/rewound to seq \d+ \(before turn 2\): 2 files restored/)
    expect(all).toContain("kept b.txt (changed since by someone else)")
    expect(all).toContain("echo shell > shell.txt")
    expect(files(repo)).toEqual({ a: "A one\n", b: "the user's own b\n", c: null })

    // the conversation goes on from before turn 2: the next request holds turn 1 and the new prompt only
    await t.waitFor(/\n› $/m)
    t.type("what now?\r")
    await t.waitFor("The session goes on from here.")
    await t.waitFor(/\n› $/m)

    // esc leaves the list: nothing changes
    t.type("/rewind\r")
    await t.waitFor("which turn? (enter: 4)")
    t.type("\x1b")
    await t.waitFor("not rewound")
    expect(files(repo)).toEqual({ a: "A one\n", b: "the user's own b\n", c: null })

    // before the first turn, overwriting the user's b.txt this time: nothing the session wrote is left
    await t.waitFor(/\n› $/m)
    t.type("/rewind\r")
    await t.waitFor("which turn? (enter: 4)")
    t.type("1\r")
    await t.waitFor("[k] keep them (rewind the rest)  [o] overwrite them")
    t.type("o")
    await t.waitFor(/› \/rewind turn:1 --force\s*$/m)
    await t.waitFor(/rewound to seq \d+ \(before turn 1\): \d+ files? restored/)
    expect(files(repo)).toEqual({ a: null, b: null, c: null })
    await t.waitFor(/\n› $/m)
    t.type("\x04")
    expect((await t.exited).exitCode).toBe(0)

    const events = readLog(sb, session)
    const firstRequestAfter = (text: string) => {
      const at = events.findIndex((e) => e.type === "user.input" && e.data.text === text)
      return events.slice(at).find((e) => e.type === "model.requested" && e.agent === "main").data.messages
    }
    expect(firstRequestAfter("what now?")).toBe(firstRequestAfter(TURNS[1]![0]))
    expect(firstRequestAfter("what now?")).toBeLessThan(firstRequestAfter(TURNS[2]![0]))
    expect(events.filter((e) => e.type === "rewind.conversation").map((e) => e.data.reset)).toEqual([true, true])
    // what the user had written is in the log: the overwrite can be undone
    expect(
      events
        .filter((e) => e.type === "rewind.completed")
        .at(-1)
        .data.restored.map((f: any) => f.path)
        .sort()
    ).toEqual(["a.txt", "b.txt"])
    verifies(sb, repo, session)
  }, 180_000)
})
