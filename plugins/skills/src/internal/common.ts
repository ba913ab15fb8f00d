import type { Prompt } from "@effect/ai"
import { Recorder, Skill } from "@musekit/core"
import type { Effect } from "effect"

/**
 * The error type of a skill's `run` is `SkillError`, but a recorded program must let the
 * recorder's own failures through unchanged: `Divergence` is what `replay --verify` reports,
 * `ReplayEnded` tells `Session.replay` that the log was cut short, `Interrupted` replays a Ctrl-C.
 * Turning them into `SkillError`s would hide them, so they pass through as they are.
 */
export const passThrough = <A, R>(
  effect: Effect.Effect<A, Skill.SkillError | Recorder.RecorderError, R>
): Effect.Effect<A, Skill.SkillError, R> => effect as unknown as Effect.Effect<A, Skill.SkillError, R>

export const skillError = (skill: string, message: string) => new Skill.SkillError({ skill, message })

/** Record a plain event for an agent. */
export const record = (agent: string, type: string, data: unknown) => Recorder.record({ agent, type, data })

/** The name of a helper agent of `owner` (`planner` for `main`, `worker-1/planner` otherwise). */
export const helperName = (owner: string, name: string) => (owner === "main" ? name : `${owner}/${name}`)

/** Text of a message (string content or its text parts). */
export const messageText = (m: Prompt.MessageEncoded): string => {
  if (typeof m.content === "string") return m.content
  return (m.content as ReadonlyArray<{ readonly type: string; readonly text?: string }>)
    .filter((p) => p.type === "text" && typeof p.text === "string")
    .map((p) => p.text!)
    .join("\n")
}

/** Keep the last `max` characters, marking the cut. */
export const tail = (text: string, max: number): string =>
  text.length <= max ? text : `[… ${text.length - max} characters cut]\n${text.slice(text.length - max)}`

export const clip = (text: string, max: number): string => (text.length <= max ? text : `${text.slice(0, max - 1)}…`)

/** Human-readable duration: `950 ms`, `42 s`, `3 min 20 s`, `2 h 5 min`. */
export const formatDuration = (ms: number): string => {
  if (ms < 1000) return `${Math.round(ms)} ms`
  const s = Math.round(ms / 1000)
  if (s < 60) return `${s} s`
  const m = Math.floor(s / 60)
  if (m < 60) return s % 60 === 0 ? `${m} min` : `${m} min ${s % 60} s`
  const h = Math.floor(m / 60)
  return m % 60 === 0 ? `${h} h` : `${h} h ${m % 60} min`
}

export const formatTokens = (n: number): string =>
  n < 1000 ? `${n}` : n < 1_000_000 ? `${(n / 1000).toFixed(1)}k` : `${(n / 1_000_000).toFixed(2)}M`
