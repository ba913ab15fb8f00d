import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { Prompt, Response } from "@effect/ai"
import { Agent, Approvals, Crew, type Event, EventLog, type Plugin, type Recorder, Session, Skill } from "@musekit/core"
import { layerAgentServices, type Turn } from "@musekit/core/testing"
import { CodingTools, WorkspaceNode } from "@musekit/node"
import { Effect, Layer } from "effect"
import { Prompts, SkillsPlugin } from "../src/index.js"

/** A real git repository in a temporary folder, removed when the scope closes. */
export const tempRepo = (files: Record<string, string>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "muse-skills-")))
      for (const [name, content] of Object.entries(files)) {
        fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true })
        fs.writeFileSync(path.join(dir, name), content)
      }
      const git = (...args: Array<string>) => execFileSync("git", args, { cwd: dir, stdio: "pipe" })
      git("init", "-q", "-b", "main")
      git("add", "-A")
      git("-c", "user.name=Test", "-c", "user.email=test@example.invalid", "commit", "-q", "-m", "initial")
      return dir
    }),
    (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
  )

export const read = (dir: string, file: string) => {
  try {
    return fs.readFileSync(path.join(dir, file), "utf8")
  } catch {
    return undefined
  }
}

/** What a scripted handler sees of one request. */
export interface Seen {
  readonly system: string
  readonly prompt: Prompt.Prompt
  /** Text of the newest user message. */
  readonly lastUser: string
  /** Results of the newest tool message, if the newest message is one. */
  readonly lastResults: ReadonlyArray<{ readonly name: string; readonly isFailure: boolean; readonly result: unknown }>
}

export type Role = "planner" | "grill" | "judge" | "worker" | "main"

/**
 * A stateless script answering by role: the helper agents are recognized by their system prompts
 * (the package's prompt files), everything else is the main agent. Answers depend on the prompt
 * only, so replayed and resumed runs get the same ones.
 */
export const byRole =
  (handlers: Partial<Record<Role, (s: Seen) => ReadonlyArray<Response.PartEncoded>>>): Turn =>
  (prompt) => {
    const sys = prompt.content.find((m) => m.role === "system")
    const system = sys && typeof sys.content === "string" ? sys.content : ""
    const role: Role =
      system === Prompts.planner()
        ? "planner"
        : system === Prompts.grill()
          ? "grill"
          : system === Prompts.judge()
            ? "judge"
            : /^You are worker-\d+, a persistent member/.test(system)
              ? "worker"
              : "main"
    const handler = handlers[role]
    if (!handler) throw new Error(`no scripted handler for ${role}`)
    const users = prompt.content.filter((m) => m.role === "user")
    const lastUserMsg = users[users.length - 1]
    const lastUser = lastUserMsg
      ? lastUserMsg.content
          .filter((p) => p.type === "text")
          .map((p) => (p as { text: string }).text)
          .join("\n")
      : ""
    const last = prompt.content[prompt.content.length - 1]
    const lastResults =
      last?.role === "tool" ? last.content.map((p) => ({ name: p.name, isFailure: p.isFailure, result: p.result })) : []
    return handler({ system, prompt, lastUser, lastResults })
  }

/** A prompter giving `answers` in turn (the last one repeats), remembering what it was asked. */
export const answering = (answers: ReadonlyArray<Approvals.Answer>) => {
  const asked: Array<Approvals.Request> = []
  return {
    asked,
    layer: Layer.succeed(Approvals.Prompter, {
      ask: (request) =>
        Effect.sync(() => {
          asked.push(request)
          return answers[Math.min(asked.length - 1, answers.length - 1)]!
        })
    })
  }
}

/** A prompter that fails the test if anyone asks (replays must not ask). */
export const neverAsked = Layer.succeed(Approvals.Prompter, {
  ask: (request) => Effect.dieMessage(`nobody should be asked, but ${request.tool} asked: ${request.summary}`)
})

export const MAIN_INSTRUCTIONS = "You are a coding agent working in a git repository."

export interface ProgramOptions {
  readonly repo: string
  readonly languageModel: Layer.Layer<any>
  readonly inputs: ReadonlyArray<string>
  readonly prompter?: Layer.Layer<Approvals.Prompter> | undefined
  readonly output?: Array<string> | undefined
  readonly skills?: SkillsPlugin.Options | undefined
  readonly plugins?: ReadonlyArray<Plugin.PluginInput> | undefined
  /** Give the skills a crew (and the main agent its tools and inbox). */
  readonly crew?: Crew.Options | undefined
}

/**
 * The program a session runs: a main agent with the coding tools, rooted in `repo`, and the
 * skills plugin; each input is invoked as a skill with the main agent in `SkillContext`.
 */
export const skillProgram = (o: ProgramOptions) =>
  Effect.gen(function* () {
    const crew = o.crew ? yield* Crew.make(o.crew) : undefined
    const agent = yield* Agent.make({
      name: "main",
      instructions: MAIN_INSTRUCTIONS,
      extraTools: crew?.tools,
      inbox: crew?.inbox
    })
    const registry = Skill.makeRegistry(SkillsPlugin.make(o.skills).skills ?? [])
    const context: Skill.ContextService = {
      agent,
      crew,
      output: (text) => Effect.sync(() => void o.output?.push(text))
    }
    const results: Array<unknown> = []
    for (const input of o.inputs) {
      results.push(yield* registry.invoke(input).pipe(Effect.provideService(Skill.SkillContext, context)))
    }
    if (crew) yield* crew.shutdown
    return results
  }).pipe(
    Effect.scoped,
    Effect.provide(
      layerAgentServices({
        languageModel: o.languageModel,
        tools: CodingTools.make({ shellTimeoutMs: 60_000 }),
        prompter: o.prompter ?? neverAsked,
        workspace: WorkspaceNode.layer(o.repo).pipe(Layer.orDie),
        plugins: o.plugins
      })
    )
  ) as Effect.Effect<ReadonlyArray<unknown>, Skill.SkillError, Recorder.Recorder>

/** Run a program live on a memory log; the result and the events. */
export const recordLive = <A, E>(program: Effect.Effect<A, E, any>) =>
  Effect.gen(function* () {
    const result = yield* Session.run(program)
    return { result, events: yield* EventLog.readAll(yield* EventLog.EventLog) }
  }).pipe(Effect.provide(EventLog.layerMemory("skills"))) as Effect.Effect<
    { result: A; events: ReadonlyArray<Event.Envelope> },
    E
  >

export const ofType = (events: ReadonlyArray<Event.Envelope>, type: string) => events.filter((e) => e.type === type)

export const data = (e: Event.Envelope | undefined) => e?.data as any
