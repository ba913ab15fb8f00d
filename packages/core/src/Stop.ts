/**
 * The stop button of a session: a request to stop the work in progress (Ctrl-C, SIGINT, SIGTERM)
 * that every agent of the session honours, the main agent and each crew member alike.
 *
 * An agent checks for a request before each step and before each tool call, and races it against
 * what it waits for (a model reply, a tool, a person's answer). A tool stopped this way gets an
 * outcome in the log (interrupted, its effect may be partial); the turn then ends with
 * `turn.interrupted`, whose `reason` is the request's. Because a stop only ever takes effect at
 * those points, a replay stops at the same ones (it sees the recorded `turn.interrupted` there).
 *
 * A request stays until `clear` (the session does that once everything in flight has stopped,
 * before it asks for the next input).
 *
 * @example
 * ```ts
 * import { Stop } from "@musekit/core"
 * import { Effect } from "effect"
 *
 * const program = Effect.gen(function* () {
 *   const stop = yield* Stop.Stop
 *   yield* stop.request("stopped by the user (Ctrl-C)")
 *   return yield* stop.requested // Option.some("stopped by the user (Ctrl-C)")
 * }).pipe(Effect.provide(Stop.layer))
 * ```
 */
import { Context, Deferred, Effect, Layer, Option } from "effect"

export interface Service {
  /** Ask every agent to stop its current turn; the first reason given is kept until `clear`. */
  readonly request: (reason: string) => Effect.Effect<void>
  /** The reason of the pending request, if there is one. */
  readonly requested: Effect.Effect<Option.Option<string>>
  /** Completes with the reason when a stop is requested (at once if one is pending). */
  readonly await: Effect.Effect<string>
  /** Forget the request: the work it stopped has stopped. */
  readonly clear: Effect.Effect<void>
}

export class Stop extends Context.Tag("@musekit/core/Stop")<Stop, Service>() {}

export const make: Effect.Effect<Service> = Effect.gen(function* () {
  let pending = yield* Deferred.make<string>()
  let reason: string | undefined
  return {
    request: (why) =>
      Effect.suspend(() => {
        if (reason !== undefined) return Effect.void
        reason = why
        return Deferred.succeed(pending, why)
      }),
    requested: Effect.sync(() => Option.fromNullable(reason)),
    await: Effect.suspend(() => Deferred.await(pending)),
    clear: Effect.suspend(() => {
      if (reason === undefined) return Effect.void
      reason = undefined
      return Effect.map(Deferred.make<string>(), (d) => {
        pending = d
      })
    })
  } satisfies Service
})

export const layer: Layer.Layer<Stop> = Layer.effect(Stop, make)

/** A stop button nobody presses (agents that run without one behave as with this). */
export const never: Service = {
  request: () => Effect.void,
  requested: Effect.succeed(Option.none()),
  await: Effect.never,
  clear: Effect.void
}
