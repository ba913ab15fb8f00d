/**
 * `muse` in a git repository: a writing crew member works in a git worktree of its own, its change
 * reaches the checkout only when the main agent merges it, and the session replays exactly.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { beforeAll, describe, expect, it } from "vitest"
import { buggyRepo, ensureBuilt, muse, readLog, sandbox, writeScript } from "./support/cli.js"

beforeAll(() => ensureBuilt(), 240_000)

const script = {
  replies: [
    {
      agent: "main",
      when: "write the notes",
      steps: [
        {
          text: "Handing it to a worker.",
          tools: [{ name: "delegate", params: { to: "worker", task: "write NOTES.md" } }]
        },
        { text: "A worker is on it." }
      ]
    },
    {
      agent: "main",
      when: "Crew reports",
      steps: [
        { text: "Merging.", tools: [{ name: "worktree_merge", params: { agent: "worker-1", message: "notes" } }] },
        { text: "Merged the notes." }
      ]
    },
    {
      agent: "worker",
      when: "NOTES",
      steps: [
        { tools: [{ name: "write_file", params: { path: "NOTES.md", content: "# Notes\n" } }] },
        { text: "Wrote NOTES.md." }
      ]
    },
    {
      agent: "reviewer",
      steps: [
        { tools: [{ name: "verdict", params: { worker: "worker-1", verdict: "approve", critique: "fine" } }] },
        { text: "Approved." }
      ]
    }
  ]
}

describe("muse with worktrees", () => {
  it("a worker writes in its own worktree, the main agent merges it, and the session replays exactly", () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const file = writeScript(sb, "notes", script)
    const r = muse(["run", "write the notes", "--script", file, "--output-format", "json"], { sb, cwd: repo })
    expect(r.code, r.stderr).toBe(0)
    const out = JSON.parse(r.stdout)
    expect(out.text).toBe("Merged the notes.")
    const events = readLog(sb, out.session)
    expect(events[0].data.config.plugins).toContain("worktree")

    // the worker's write landed in its worktree, outside the checkout
    const allocated = events.find((e) => e.type === "worktree.allocated")
    expect(allocated?.agent).toBe("worker-1")
    const worktree: string = allocated.data.allocation.path
    expect(path.relative(repo, worktree).startsWith("..")).toBe(true)
    const write = events.find(
      (e) => e.type === "tool.completed" && e.agent === "worker-1" && e.data.tool === "write_file"
    )
    expect(write?.data.isFailure).toBe(false)
    // it reached the checkout through the merge, as a commit on the session's branch
    const merged = events.find((e) => e.type === "tool.completed" && e.data.tool === "worktree_merge")
    expect(merged?.agent).toBe("main")
    expect(merged?.data.isFailure, JSON.stringify(merged?.data)).toBe(false)
    expect(fs.readFileSync(path.join(repo, "NOTES.md"), "utf8")).toBe("# Notes\n")
    const log = execFileSync("git", ["log", "--format=%s", "-3"], { cwd: repo, encoding: "utf8" })
    expect(log).toContain("notes")

    const replay = muse(["replay", out.session, "--verify"], { sb, cwd: repo })
    expect(replay.code, replay.stderr + replay.stdout).toBe(0)
  })

  it("in a repository whose own config names commands, muse's git runs none of them", () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const marks = fs.mkdtempSync(path.join(sb.root, "marks-"))
    const evil = path.join(sb.root, "evil.sh")
    fs.writeFileSync(evil, `#!/bin/sh\ntouch "${marks}/$1"\ncat\n`, { mode: 0o755 })
    fs.writeFileSync(path.join(repo, ".gitattributes"), "* filter=evil\n")
    execFileSync("git", ["add", ".gitattributes"], { cwd: repo })
    execFileSync("git", ["-c", "user.name=T", "-c", "user.email=t@example.invalid", "commit", "-qm", "attributes"], {
      cwd: repo
    })
    fs.appendFileSync(
      path.join(repo, ".git", "config"),
      `[core]\n\tfsmonitor = ${evil} fsmonitor\n[filter "evil"]\n\tclean = ${evil} clean\n\tsmudge = ${evil} smudge\n`
    )
    for (const hook of ["post-commit", "post-merge", "post-checkout", "reference-transaction"]) {
      fs.writeFileSync(path.join(repo, ".git", "hooks", hook), `#!/bin/sh\ntouch "${marks}/${hook}"\n`, { mode: 0o755 })
    }
    const file = writeScript(sb, "notes", script)
    const r = muse(["run", "write the notes", "--script", file, "--output-format", "json"], { sb, cwd: repo })
    expect(r.code, r.stderr).toBe(0)
    expect(JSON.parse(r.stdout).text).toBe("Merged the notes.")
    expect(fs.readFileSync(path.join(repo, "NOTES.md"), "utf8")).toBe("# Notes\n")
    expect(fs.readdirSync(marks)).toEqual([])
  })

  it("--no-worktrees, and a directory that is not a git repository, keep the crew in the checkout", () => {
    const sb = sandbox()
    const repo = buggyRepo(sb.root)
    const file = writeScript(sb, "notes", script)
    const r = muse(["run", "write the notes", "--script", file, "--no-worktrees", "--output-format", "json"], {
      sb,
      cwd: repo
    })
    expect(r.code, r.stderr).toBe(0)
    const events = readLog(sb, JSON.parse(r.stdout).session)
    expect(events[0].data.config.plugins).not.toContain("worktree")
    expect(events.some((e) => e.type === "worktree.allocated")).toBe(false)
    // the worker wrote straight into the checkout; the merge tool does not exist here
    expect(fs.readFileSync(path.join(repo, "NOTES.md"), "utf8")).toBe("# Notes\n")

    const plain = fs.mkdtempSync(path.join(sb.root, "plain-"))
    const r2 = muse(["run", "write the notes", "--script", file, "--output-format", "json"], { sb, cwd: plain })
    expect(r2.code, r2.stderr).toBe(0)
    expect(readLog(sb, JSON.parse(r2.stdout).session)[0].data.config.plugins).not.toContain("worktree")
    expect(fs.readFileSync(path.join(plain, "NOTES.md"), "utf8")).toBe("# Notes\n")
  })
})
