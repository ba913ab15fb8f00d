/**
 * The skills' state between user inputs (the current plan, the counters, the planner's
 * conversation) is kept in checkpoints: a session resumed from one goes on exactly as a session
 * that replays its whole log.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { comparableEvents, inputs, Scripted, scriptedModel } from "@musekit/core/testing"
import { EventLogFile, SessionRuntime } from "@musekit/node"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { Plan, SkillsPlugin } from "../src/index.js"
import { byRole, type Seen } from "./helpers.js"

const step = (id: string, file: string) => ({
  id,
  intent: `Create ${file} with the letter ${id}`,
  files: [file],
  risks: [],
  verify: `${file} exists`,
  dependsOn: []
})

const planner = (s: Seen) => {
  if (s.lastResults.some((r) => r.name === "submit_plan")) return Scripted.text("Plan submitted.")
  if (s.lastResults.length === 0) return Scripted.toolCalls([{ id: "look", name: "list_files", params: {} }])
  const steps = s.lastUser.includes("third") ? [step("s3", "notes/c.txt")] : [step("s1", "notes/a.txt")]
  return Scripted.toolCalls([{ id: "submit", name: "submit_plan", params: { title: "Notes", steps } }])
}

const main = (s: Seen) => {
  const m = /Carry out step (\w+) .*\nCreate (\S+) with/.exec(s.lastUser)
  if (!m) return Scripted.text("nothing to do")
  const [, id, file] = m
  if (s.lastResults.length > 0) return Scripted.text(`Wrote ${file}.\nSTEP STATUS: done`)
  return Scripted.toolCalls([{ id: `write-${id}`, name: "write_file", params: { path: file, content: `${id}\n` } }])
}

const services = (): SessionRuntime.Services => ({
  languageModel: scriptedModel([byRole({ planner, main })]).layer,
  plugins: [SkillsPlugin.make()]
})

const io = (texts: ReadonlyArray<string>, resumed?: Array<SessionRuntime.ResumeInfo>): SessionRuntime.Io => {
  return {
    input: inputs(texts),
    prompter: { ask: () => Effect.succeed(Plan.answers.approve) },
    onResume: (info) => Effect.sync(() => void resumed?.push(info))
  }
}

const comparable = comparableEvents

const read = (dir: string) => Effect.runPromise(EventLogFile.readSession("s", { dir }))

describe("skills and checkpoints", () => {
  it("after /plan, a checkpoint keeps the plan and the planner; resuming from it equals resuming from the log", async () => {
    const base = fs.mkdtempSync(path.join(os.tmpdir(), "muse-skills-cp-"))
    const root = path.join(base, "root")
    const dir = path.join(base, "state")
    fs.mkdirSync(root)
    fs.writeFileSync(path.join(root, "README.md"), "# notes\n")
    const config = SessionRuntime.config({ root, model: "scripted/skills", approvalMode: "auto", crew: false })
    await Effect.runPromise(
      SessionRuntime.start({
        config,
        session: "s",
        dir,
        io: io(["/plan write a note"]),
        services: services(),
        checkpointEvery: 5
      })
    )
    const saved = EventLogFile.readCheckpoint(dir, "s")
    if (saved._tag === "Left") throw new Error(`no checkpoint: ${saved.left}`)
    const skills = (saved.right.state as SessionRuntime.State).plugins.skills as Record<string, any>
    expect(skills.main).toMatchObject({ plans: 1, current: { id: "plan-1", status: "done" } })
    expect(skills.main.planner.history.length).toBeGreaterThan(2)

    fs.cpSync(dir, path.join(base, "state-full"), { recursive: true })
    fs.cpSync(root, path.join(base, "root-start"), { recursive: true })
    const resumed: Array<SessionRuntime.ResumeInfo> = []
    const next = ["/plan write a third note"]
    await Effect.runPromise(SessionRuntime.resume({ session: "s", dir, io: io(next, resumed), services: services() }))
    const viaCheckpoint = await read(dir)
    const noteViaCheckpoint = fs.readFileSync(path.join(root, "notes", "c.txt"), "utf8")
    fs.rmSync(root, { recursive: true })
    fs.cpSync(path.join(base, "root-start"), root, { recursive: true })
    await Effect.runPromise(
      SessionRuntime.resume({
        session: "s",
        dir: path.join(base, "state-full"),
        io: io(next, resumed),
        services: services(),
        useCheckpoint: false
      })
    )
    expect(resumed.map((r) => r.checkpoint)).toEqual([saved.right.seq, null])
    expect(comparable(viaCheckpoint)).toEqual(comparable(await read(path.join(base, "state-full"))))
    expect(noteViaCheckpoint).toBe("s3\n")
    // the second plan is plan-2, and the planner went on with its conversation
    expect(viaCheckpoint.some((e) => e.type === "plan.proposed" && (e.data as any).id === "plan-2")).toBe(true)
    const second = viaCheckpoint.filter((e) => e.type === "model.requested" && e.agent === "planner").at(-2)!
    expect((second.data as { keep: number }).keep).toBeGreaterThan(2)
  }, 60_000)
})
