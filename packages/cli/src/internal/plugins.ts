/**
 * The plugins every `muse` session runs with: the skills (`/plan`, `/grill`, `/goal` and the
 * project's `SKILL.md` files), context compaction (with `/compact`), video input and — in a git
 * repository, with the crew — a git worktree for every writing crew member; and the tools of the
 * session's MCP servers (`mcp.ts`). The session records
 * the names of its plugins, and `resume` and `replay` build the same set, so recorded sessions
 * replay exactly. Compaction and video are loaded when a session first needs them (a large
 * context, a prompt with a video), not at start-up.
 */

import type { Prompt } from "@effect/ai"
import { type Plugin, Recorder, Skill } from "@musekit/core"
import { Git } from "@musekit/node"
import * as SkillsPackage from "@musekit/plugin-skills"
import { WorktreePlugin } from "@musekit/plugin-worktree"
import { Effect, Option } from "effect"
import type * as Mcp from "./mcp.js"
import * as ModelInfo from "./modelInfo.js"

export interface SkillInfo {
  readonly name: string
  readonly description: string
}

export interface PluginSet {
  readonly plugins: ReadonlyArray<Plugin.PluginInput>
  /** The session's MCP servers and the tools they offered (when it has any). */
  readonly mcp?: Mcp.Loaded | undefined
  /** Stop what the plugins started (MCP servers); idempotent. */
  readonly close: Effect.Effect<void>
  readonly skills: ReadonlyArray<SkillInfo>
  /** Problems worth showing (a SKILL.md that could not be used, a plugin that is missing). */
  readonly warnings: ReadonlyArray<string>
  /** The plugins' names, as the session records them. */
  readonly names: ReadonlyArray<string>
}

/** The worktree option for a recorded session: on when it was recorded with the worktree plugin. */
export const recordedWorktrees = (
  config: { readonly plugins?: ReadonlyArray<string> | undefined },
  sessionId: string,
  replaying = false
) => (config.plugins?.includes("worktree") ? { sessionId, replaying } : undefined)

// ---------------------------------------------------------------------------------------------
// /compact: a recorded request to compact an agent's context before its next model call

/** Agents with a pending `/compact`, per session (keyed by the session's recorder). */
const pending = new WeakMap<object, Set<string>>()

const requestsOf = (rec: object) => {
  let set = pending.get(rec)
  if (!set) pending.set(rec, (set = new Set()))
  return set
}

export const compactSkill: Skill.Skill<string, any> = Skill.make({
  name: "compact",
  description:
    "Compact the main agent's context (mask old tool output, summarize older turns) before its next model call.",
  source: "@musekit/cli",
  run: () =>
    Effect.gen(function* () {
      const ctx = yield* Skill.SkillContext
      const rec = yield* Recorder.Recorder
      requestsOf(rec).add(ctx.agent.name)
      return `The context of ${ctx.agent.name} will be compacted before its next model call.`
    })
})

type ContextHandler = Plugin.HookFn<Plugin.ContextInput, ReadonlyArray<Prompt.MessageEncoded>, Recorder.RecorderError>

interface Compaction {
  readonly handler: ContextHandler
  readonly checkpoint: Plugin.Checkpointing | undefined
}

/** The compaction plugin for a window function, loaded on first need, its tokenizer warmed up. */
const loadCompaction = (contextWindow: (model: string) => number): Promise<Compaction | undefined> =>
  import("@musekit/plugin-compaction").then(
    (m: any) => {
      m?.Tokens?.countText?.("warm up the tokenizer")
      const plugin = m?.CompactionPlugin?.make?.({ contextWindow }) as Plugin.Plugin | undefined
      const hook = plugin?.hooks?.transformContext
      const handler = (typeof hook === "function" ? hook : hook?.handler) as ContextHandler | undefined
      return handler ? { handler, checkpoint: plugin?.checkpoint } : undefined
    },
    () => undefined
  )

/**
 * The compaction plugin's state restored from a checkpoint, per session, until the plugin is
 * loaded (it is loaded on first need, which may be long after the resume).
 */
const restoredCompaction = new WeakMap<object, unknown>()

const innerState = (c: Compaction) => (c.checkpoint && c.checkpoint !== "stateless" ? c.checkpoint : undefined)

/** Hand a restored state to the loaded plugin (with the session's recorder in context). */
const applyRestored = (c: Compaction) =>
  Effect.gen(function* () {
    const rec = yield* Recorder.Recorder
    const inner = innerState(c)
    if (!inner || !restoredCompaction.has(rec)) return
    const state = restoredCompaction.get(rec)
    restoredCompaction.delete(rec)
    yield* inner.restore(state)
  })

/**
 * Whether a context is certainly below the compaction trigger, without loading the tokenizer. The
 * bound is the context's UTF-8 size (no BPE token is shorter than a byte; the JSON of a message is
 * longer than its per-message overheads), checked against the plugin's default trigger. The check
 * depends only on the context and the recorded window, so a replay decides the same way.
 */
const certainlySmall = (input: Plugin.ContextInput, window: number): "small" | "half" | false => {
  const reserve = Math.min(Math.min(16_000, Math.max(512, Math.round(window * 0.1))), Math.floor(window / 4))
  const limit = Math.floor(window * 0.75) - reserve - 64
  let bytes = Buffer.byteLength(input.system)
  if (bytes > limit) return false
  for (const m of input.messages) {
    const n = jsonBytes(m)
    if (n < 0) return false
    bytes += n + 8
    if (bytes > limit) return false
  }
  return bytes > limit / 2 ? "half" : "small"
}

/**
 * UTF-8 size of a message's JSON, or -1 for a message with a file in it (its size says nothing of its
 * tokens); messages are immutable, so it is taken once per message.
 */
const sizes = new WeakMap<object, number>()
const jsonBytes = (m: { readonly content: unknown }): number => {
  let n = sizes.get(m)
  if (n === undefined) {
    n =
      Array.isArray(m.content) && m.content.some((p: { readonly type: string }) => p.type === "file")
        ? -1
        : Buffer.byteLength(JSON.stringify(m))
    sizes.set(m, n)
  }
  return n
}

/** `contextWindow`: the session's recorded window; the model table's when absent (older sessions). */
const compactionPlugin = (contextWindow: number | undefined): Plugin.Plugin => {
  const windowOf = (model: string) => contextWindow ?? ModelInfo.contextWindow(model)
  let loading: Promise<Compaction | undefined> | undefined
  let loadedCompaction: Compaction | undefined
  return {
    name: "compaction",
    skills: [compactSkill],
    checkpoint: {
      save: Effect.gen(function* () {
        const rec = yield* Recorder.Recorder
        const inner = loadedCompaction ? innerState(loadedCompaction) : undefined
        let compactions: unknown = restoredCompaction.get(rec) ?? {}
        if (inner && !restoredCompaction.has(rec)) compactions = yield* inner.save
        if (compactions === undefined) return undefined
        return { pending: [...requestsOf(rec)], compactions }
      }),
      restore: (state) =>
        Effect.gen(function* () {
          const rec = yield* Recorder.Recorder
          const st = state as { pending: ReadonlyArray<string>; compactions: unknown }
          for (const agent of st.pending) requestsOf(rec).add(agent)
          restoredCompaction.set(rec, st.compactions)
          if (loadedCompaction) yield* applyRestored(loadedCompaction)
        })
    },
    hooks: {
      transformContext: {
        order: "post",
        handler: (input) =>
          Effect.gen(function* () {
            const rec = yield* Effect.serviceOption(Recorder.Recorder)
            const requested = Option.isSome(rec) && requestsOf(rec.value).delete(input.agent)
            const force = input.force || requested
            const small = force ? false : certainlySmall(input, windowOf(input.model))
            if (small) {
              // Past half the trigger: load the plugin and its tokenizer (a few hundred ms) once this
              // request is on its way, while the model answers, rather than in the middle of a turn.
              if (small === "half" && loading === undefined) {
                setTimeout(() => {
                  loading ??= loadCompaction(windowOf)
                }, 0)
              }
              return input.messages
            }
            const compaction = yield* Effect.promise(() => (loading ??= loadCompaction(windowOf)))
            if (!compaction) return input.messages
            loadedCompaction = compaction
            if (Option.isSome(rec))
              yield* Effect.provideService(applyRestored(compaction), Recorder.Recorder, rec.value)
            return yield* compaction.handler({ ...input, force })
          })
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// video input, loaded when a prompt mentions or attaches a video

type PromptHandler = Plugin.HookFn<Plugin.PromptInput, Plugin.PromptInput>

let videoHandler: Promise<PromptHandler | undefined> | undefined
const loadVideo = (cwd: string): Promise<PromptHandler | undefined> => {
  videoHandler ??= import("@musekit/plugin-video").then(
    (m: any) => {
      const plugin = m?.VideoPlugin?.make?.({ cwd }) as Plugin.Plugin | undefined
      const hook = plugin?.hooks?.transformPrompt
      return (typeof hook === "function" ? hook : hook?.handler) as PromptHandler | undefined
    },
    () => undefined
  )
  return videoHandler
}

const VIDEO = /\.(mp4|m4v|mov|webm|mkv|avi)\b/i

const videoPlugin = (cwd: string): Plugin.Plugin => ({
  name: "video",
  checkpoint: "stateless",
  hooks: {
    transformPrompt: (input) =>
      input.attachments.length === 0 && !input.content.some((p) => p.type === "text" && VIDEO.test(p.text))
        ? Effect.succeed(input)
        : Effect.flatMap(
            Effect.promise(() => loadVideo(cwd)),
            (h) => (h ? h(input) : Effect.succeed(input))
          )
  }
})

// ---------------------------------------------------------------------------------------------

/**
 * Whether `root` is inside a git working tree with at least one commit (worktrees start from it).
 * Asked with muse's hardened git, like every other git call muse makes.
 */
export const inGitRepo = async (root: string): Promise<boolean> => {
  // one process: it prints "true" and the commit, and fails without a commit to resolve
  const r = await Git.run(["rev-parse", "--is-inside-work-tree", "--verify", "--quiet", "HEAD^{commit}"], {
    cwd: root
  }).catch(() => undefined)
  return r?.status === 0 && r.stdout.split("\n")[0]?.trim() === "true"
}

/** What the main agent is told when crew members work in worktrees. */
export const worktreeInstructions = [
  "Crew members that change files work in git worktrees of their own, branched from the commit the session started on:",
  "their changes are not in the checkout until you merge them. When a member reports a finished change, look at it",
  "with worktree_diff and bring it in with worktree_merge (a conflict is reported and nothing is left half-merged)."
].join(" ")

/** The plugin set for a project. */
export const make = (options: {
  readonly root: string
  /** Load the project's `SKILL.md` files (only in a trusted folder; replays always do). */
  readonly projectSkills: boolean
  readonly userDir?: string | null | undefined
  /** Give writing crew members their own git worktree (the session's id names their branches). */
  readonly worktrees?: { readonly sessionId: string; readonly replaying?: boolean | undefined } | undefined
  /** The session's context window in tokens (recorded); the model table's when absent. */
  readonly contextWindow?: number | undefined
  /** The session's MCP servers (see `mcp.ts`). */
  readonly mcp?: Mcp.Loaded | undefined
}) =>
  Effect.gen(function* () {
    const warnings: Array<string> = []
    const plugins: Array<Plugin.PluginInput> = []
    const sp = (SkillsPackage as any).SkillsPlugin
    if (sp && typeof sp.load === "function") {
      const loaded = yield* (
        sp.load({
          projectDir: options.projectSkills ? options.root : undefined,
          userDir: options.userDir
        }) as Effect.Effect<{
          plugin: Plugin.Plugin
          errors: ReadonlyArray<{ message: string }>
        }>
      ).pipe(Effect.catchAllDefect(() => Effect.succeed(undefined)))
      if (loaded) {
        plugins.push(loaded.plugin)
        for (const e of loaded.errors) warnings.push(e.message)
      } else if (typeof sp.make === "function") plugins.push(sp.make({}))
    } else if (sp && typeof sp.make === "function") plugins.push(sp.make({}))
    else warnings.push("@musekit/plugin-skills is not available: /plan, /grill and /goal are off")
    plugins.push(compactionPlugin(options.contextWindow))
    plugins.push(videoPlugin(options.root))
    if (options.worktrees) {
      plugins.push(
        WorktreePlugin.make({
          repo: options.root,
          sessionId: options.worktrees.sessionId,
          replaying: options.worktrees.replaying
        })
      )
    }
    if (options.mcp) {
      plugins.push(options.mcp.plugin)
      warnings.push(...options.mcp.warnings)
    }
    const skills: Array<SkillInfo> = []
    for (const p of plugins) {
      if (!p || Array.isArray(p)) continue
      for (const s of (p as Plugin.Plugin).skills ?? []) skills.push({ name: s.name, description: s.description })
    }
    const servers = options.mcp?.servers
    return {
      plugins,
      mcp: options.mcp,
      close: servers ? servers.close : Effect.void,
      skills,
      warnings,
      names: plugins.flatMap((p) => (p && !Array.isArray(p) ? [(p as Plugin.Plugin).name] : []))
    } satisfies PluginSet
  })
