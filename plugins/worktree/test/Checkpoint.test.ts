/**
 * A crew member in a worktree of its own comes back from a checkpoint in that worktree: the
 * resumed session restores it (no spawn is recorded again), its next change lands in the same
 * worktree, the merge brings everything in, and the whole log still replays exactly from its start.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { inputs, routed, Scripted, scriptedModel } from "@musekit/core/testing"
import { CodingTools, EventLogFile, SessionRuntime } from "@musekit/node"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import * as WorktreePlugin from "../src/WorktreePlugin.js"

const git = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", ["-c", "user.name=Test", "-c", "user.email=test@example.invalid", ...args], {
    cwd,
    encoding: "utf8"
  })

const model = () =>
  scriptedModel([
    routed({
      main: (c) => {
        const part = /^part (\d+)$/.exec(c.lastUser)?.[1]
        if (part !== undefined && c.lastResults.length === 0) {
          return Scripted.toolCalls([
            { id: `d${part}`, name: "delegate", params: { to: "worker-1", task: `write part ${part}` } }
          ])
        }
        if (c.lastUser === "merge" && c.lastResults.length === 0) {
          return Scripted.toolCalls([
            { id: "m", name: "worktree_merge", params: { agent: "worker-1", message: "parts" } }
          ])
        }
        return Scripted.text("noted")
      },
      worker: (c) => {
        const part = /write part (\d+)/.exec(c.lastUser)?.[1]
        if (part === undefined || c.lastResults.length > 0) return Scripted.text(`part ${part ?? "?"} written`)
        return Scripted.toolCalls([
          { id: `p${part}`, name: "write_file", params: { path: `part${part}.txt`, content: `part ${part}\n` } }
        ])
      },
      reviewer: (c) =>
        c.lastResults.length > 0
          ? Scripted.text("approved")
          : Scripted.toolCalls([
              { id: `v${c.turn}`, name: "verdict", params: { worker: "worker-1", verdict: "approve", critique: "ok" } }
            ])
    })
  ]).layer

describe("worktrees and checkpoints", () => {
  it("a member in a worktree is restored into it from a checkpoint; the log replays exactly", async () => {
    const base = fs.mkdtempSync(path.join(os.tmpdir(), "muse-wt-cp-"))
    const repo = path.join(base, "repo")
    const dir = path.join(base, "state")
    fs.mkdirSync(repo)
    fs.writeFileSync(path.join(repo, "README.md"), "# demo\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "init")
    const plugins = () => [WorktreePlugin.make({ repo, sessionId: "s", root: path.join(base, "worktrees") })]
    const services = (): SessionRuntime.Services => ({
      languageModel: model(),
      tools: CodingTools.make({ grepEngine: "js" }),
      plugins: plugins()
    })
    const io = (texts: ReadonlyArray<string>, resumed?: Array<SessionRuntime.ResumeInfo>): SessionRuntime.Io => ({
      input: inputs(texts),
      prompter: { ask: () => Effect.succeed({ allow: true, scope: "once" as const }) },
      onResume: (info) => Effect.sync(() => void resumed?.push(info))
    })
    const config = SessionRuntime.config({
      root: repo,
      model: "scripted/wt",
      approvalMode: "auto",
      instructions: "Lead.",
      plugins: ["worktree"]
    })
    await Effect.runPromise(
      SessionRuntime.start({ config, session: "s", dir, io: io(["part 1"]), services: services(), checkpointEvery: 5 })
    )
    const saved = EventLogFile.readCheckpoint(dir, "s")
    if (saved._tag === "Left") throw new Error(`no checkpoint: ${saved.left}`)
    const member = (saved.right.state as SessionRuntime.State).crew?.members.find((m) => m.name === "worker-1")
    const worktree = (member?.workspace as { path: string } | undefined)?.path
    expect(worktree && fs.readFileSync(path.join(worktree, "part1.txt"), "utf8")).toBe("part 1\n")
    expect(fs.existsSync(path.join(repo, "part1.txt"))).toBe(false)

    const resumed: Array<SessionRuntime.ResumeInfo> = []
    await Effect.runPromise(
      SessionRuntime.resume({
        session: "s",
        dir,
        io: io(["part 2", "merge"], resumed),
        services: services(),
        checkpointEvery: 5
      })
    )
    expect(resumed[0]?.checkpoint).toBe(saved.right.seq)
    const events = await Effect.runPromise(EventLogFile.readSession("s", { dir }))
    // the member was not spawned again: its second task ran in the worktree it had
    expect(events.filter((e) => e.type === "crew.spawned" && e.agent === "worker-1")).toHaveLength(1)
    expect(events.filter((e) => e.type === "worktree.allocated")).toHaveLength(1)
    expect(fs.readFileSync(path.join(worktree!, "part2.txt"), "utf8")).toBe("part 2\n")
    // merged into the checkout on request
    expect(fs.readFileSync(path.join(repo, "part1.txt"), "utf8")).toBe("part 1\n")
    expect(fs.readFileSync(path.join(repo, "part2.txt"), "utf8")).toBe("part 2\n")
    // a later checkpoint, and the whole log replays from the start with no git at all
    const later = EventLogFile.readCheckpoint(dir, "s")
    expect(later._tag === "Right" && later.right.seq > saved.right.seq).toBe(true)
    const report = await Effect.runPromise(
      SessionRuntime.replay({
        session: "s",
        dir,
        verify: true,
        tools: CodingTools.make({ grepEngine: "js" }),
        plugins: [WorktreePlugin.make({ repo: path.join(base, "gone"), sessionId: "s", replaying: true })]
      })
    )
    expect(report.matched).toBe(events.length)
  }, 60_000)
})
