import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { LanguageModel } from "@effect/ai"
import { describe, expect, it } from "@effect/vitest"
import { Agent, Crew, EventLog, Model, Session } from "@musekit/core"
import { layerAgentServices, routed, Scripted, scriptedModel } from "@musekit/core/testing"
import { CodingTools, WorkspaceNode } from "@musekit/node"
import { Effect, Layer } from "effect"
import * as WorktreePlugin from "../src/WorktreePlugin.js"

const git = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", ["-c", "user.name=Test", "-c", "user.email=test@example.invalid", ...args], {
    cwd,
    encoding: "utf8"
  })

const makeRepo = () => {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), "muse-wtp-"))
  const repo = path.join(base, "repo")
  fs.mkdirSync(repo)
  fs.writeFileSync(path.join(repo, "README.md"), "# demo\n")
  git(repo, "init", "-q", "-b", "main")
  git(repo, "add", ".")
  git(repo, "commit", "-q", "-m", "init")
  return { base, repo }
}

const script = (repo: string) =>
  routed({
    main: (c) => {
      if (c.turn === 0)
        return Scripted.toolCalls([{ name: "delegate", params: { to: "worker", task: "write hello.txt" } }])
      if (c.lastResults[0]?.name === "worktree_merge") return Scripted.text("merged")
      if (c.lastUser.includes("worker-1: finished task")) {
        return Scripted.toolCalls([{ name: "worktree_merge", params: { agent: "worker-1" } }])
      }
      return Scripted.text("waiting")
    },
    worker: (c) => {
      if (c.turn === 0) {
        return Scripted.toolCalls([
          { id: "w1", name: "write_file", params: { path: "hello.txt", content: "hi from worker-1\n" } },
          { id: "w2", name: "write_file", params: { path: path.join(repo, "evil.txt"), content: "escaped\n" } },
          { id: "w3", name: "write_file", params: { path: "../repo/evil.txt", content: "escaped\n" } }
        ])
      }
      return Scripted.text("wrote hello.txt")
    },
    reviewer: (c) =>
      c.turn === 0
        ? Scripted.toolCalls([{ name: "verdict", params: { worker: "worker-1", verdict: "approve", critique: "ok" } }])
        : Scripted.text("approved")
  })

const program = (repo: string, languageModel: Layer.Layer<LanguageModel.LanguageModel>) =>
  Effect.gen(function* () {
    const crew = yield* Crew.make()
    const main = yield* Agent.make({ name: "main", instructions: "Lead.", extraTools: crew.tools, inbox: crew.inbox })
    yield* main.send("get hello.txt written")
    yield* crew.run(main)
    yield* crew.shutdown
  }).pipe(
    Effect.scoped,
    Effect.provide(
      layerAgentServices({
        languageModel,
        tools: CodingTools.make(),
        workspace: WorkspaceNode.layer(repo).pipe(Layer.orDie),
        plugins: [WorktreePlugin.make({ repo, sessionId: "s1" })]
      })
    )
  )

describe("WorktreePlugin", () => {
  it.live("a writing member works in its own worktree, cannot escape it, and its work is merged on request", () =>
    Effect.gen(function* () {
      const { repo } = makeRepo()
      const events = yield* Effect.gen(function* () {
        yield* Session.run(program(repo, scriptedModel([script(repo)]).layer))
        return yield* EventLog.readAll(yield* EventLog.EventLog)
      }).pipe(Effect.provide(EventLog.layerMemory("s1")))

      const allocated = events.find((e) => e.type === "worktree.allocated")!
      const wt = (allocated.data as any).allocation
      expect(allocated.agent).toBe("worker-1")
      expect(wt.branch).toBe("muse/s1/worker-1")
      expect(fs.realpathSync(wt.path).startsWith(fs.realpathSync(repo))).toBe(false)
      const spawned = events.find((e) => e.type === "crew.spawned" && e.agent === "worker-1")!
      expect((spawned.data as any).workspace.path).toBe(wt.path)

      // the write went to the worktree; both escape attempts were refused and wrote nothing
      const writes = events.filter((e) => e.type === "tool.completed" && e.agent === "worker-1")
      expect(writes.map((e) => (e.data as any).isFailure)).toEqual([false, true, true])
      expect((writes[1]!.data as any).result.error).toContain("is outside the workspace")
      expect(fs.existsSync(path.join(repo, "evil.txt"))).toBe(false)

      // merged into the main checkout on the main agent's explicit request
      const merge = events.find((e) => e.type === "tool.completed" && (e.data as any).tool === "worktree_merge")!
      expect((merge.data as any).result._tag).toBe("Merged")
      expect(fs.readFileSync(path.join(repo, "hello.txt"), "utf8")).toBe("hi from worker-1\n")
      expect(git(repo, "status", "--porcelain")).toBe("")
      expect(git(repo, "log", "--oneline").split("\n").filter(Boolean).length).toBeGreaterThanOrEqual(3)

      // the session replays exactly without touching git
      const worktreesBefore = git(repo, "worktree", "list", "--porcelain")
      const headBefore = git(repo, "rev-parse", "HEAD")
      const report = yield* Session.replay(program(repo, Model.layerLanguageModelForbidden), { events, verify: true })
      expect(report.matched).toBe(events.length)
      expect(git(repo, "worktree", "list", "--porcelain")).toBe(worktreesBefore)
      expect(git(repo, "rev-parse", "HEAD")).toBe(headBefore)
    })
  )
})
