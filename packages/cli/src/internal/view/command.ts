/**
 * `muse view [<id>]`: a session's timeline as one self-contained HTML file, from its log (a file
 * store or a Postgres one, a finished session, a fork or one still running). `--open` opens it in
 * the browser; `--serve` serves it on 127.0.0.1 instead and keeps it live while the session runs.
 *
 * @example
 * ```sh
 * muse view 20261204-035756-d41996 --open
 * muse view --serve --port 7400          # the latest session, live
 * ```
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type { Event, EventLog } from "@musekit/core"
import { Effect } from "effect"
import { CliError, ExitCode } from "../exit.js"
import type * as History from "../history.js"
import * as Render from "../render.js"
import * as Session from "../session.js"
import * as Blobs from "./blobs.js"
import * as Details from "./details.js"
import * as Open from "./open.js"
import * as Page from "./page.js"
import * as Serve from "./serve.js"
import { Timeline } from "./timeline.js"

export interface Options {
  readonly session: string | undefined
  readonly out: string | undefined
  readonly open: boolean
  readonly serve: boolean
  readonly port: number | undefined
  readonly flags: Pick<Session.Flags, "cwd" | "log">
  readonly env: Session.Env
}

/** The page of a session's events. */
export const pageOf = (
  session: string,
  events: ReadonlyArray<Event.Envelope>,
  store: EventLog.StoreService | undefined,
  options: { readonly live?: string | undefined } = {}
) =>
  Effect.gen(function* () {
    const t = new Timeline(session)
    for (const e of events) t.add(e)
    t.changes()
    const blobs = store ? yield* Blobs.fetch(store, Details.allBlobs(t.marks)) : new Map<string, string>()
    return {
      timeline: t,
      html: Page.render(t, { blob: (h) => blobs.get(h), live: options.live, generatedBy: `muse view ${session}` })
    }
  })

export const run = (options: Options, out: History.Out, err: History.Out): Effect.Effect<number, CliError> =>
  Effect.gen(function* () {
    const { store } = yield* Session.storeFor(options.flags, options.env)
    const session = options.session ?? (yield* Session.latestSession(store))
    const { events } = yield* Session.readRecorded(session, store)
    if (events.length === 0) {
      err.write(`session ${session} holds no events yet: it stopped before its task was recorded\n`)
    }
    if (options.serve) {
      return yield* Serve.serve({ session, store, events, port: options.port, out, err, open: options.open })
    }
    const started = performance.now()
    const { html, timeline } = yield* pageOf(session, events, store)
    const file =
      options.out === undefined
        ? path.resolve(options.env.cwd, `muse-${session}.html`)
        : path.resolve(options.env.cwd, options.out)
    if (options.out === "-") {
      out.write(html)
      return ExitCode.Success
    }
    yield* Effect.try({
      try: () => fs.writeFileSync(file, html, { mode: 0o600 }),
      catch: (e) => new CliError({ code: ExitCode.Failed, message: `cannot write ${file}: ${(e as Error).message}` })
    })
    err.write(
      `${Render.fmtInt(events.length)} events · ${Render.fmtInt(timeline.marks.length)} marks · ${Render.fmtInt(timeline.lanes.length)} agents → ${file} (${(Buffer.byteLength(html) / 1024).toFixed(0)} KiB, ${Render.fmtDuration(performance.now() - started)})\n`
    )
    out.write(`${file}\n`)
    if (options.open) Open.inBrowser(file, err)
    return ExitCode.Success
  }).pipe(Effect.scoped)
