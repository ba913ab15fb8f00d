/**
 * `muse view --serve`: the timeline page on 127.0.0.1, kept live while the session runs. The
 * server follows the session's log in its store (the same reads `muse log --follow` makes), folds
 * what is new and pushes the changed marks to open pages as server-sent events. Only this machine
 * can reach it, and only with the random path it prints (the page carries a session's prompts and
 * outputs); a request for another host name is refused (DNS rebinding).
 *
 * @example
 * ```ts
 * yield* Serve.serve({ session, store, events, port: 0, out, err, open: false }) // until interrupted
 * ```
 */
import { randomBytes } from "node:crypto"
import * as http from "node:http"
import type { Event, EventLog } from "@musekit/core"
import { Effect } from "effect"
import { CliError, ExitCode } from "../exit.js"
import type * as History from "../history.js"
import * as Render from "../render.js"
import * as Blobs from "./blobs.js"
import * as Details from "./details.js"
import * as Open from "./open.js"
import * as Page from "./page.js"
import { type Mark, Timeline } from "./timeline.js"

export interface ServeOptions {
  readonly session: string
  readonly store: EventLog.StoreService
  readonly events: ReadonlyArray<Event.Envelope>
  readonly port: number | undefined
  readonly out: History.Out
  readonly err: History.Out
  readonly open: boolean
  /** How often the log is read for new events (default 300 ms). */
  readonly pollMs?: number | undefined
  /** Called once the server listens (tests). */
  readonly onListening?: ((url: string) => void) | undefined
}

/** Updates kept for pages that connect late (older ones reload the page instead). */
const KEPT = 2000

interface Update {
  readonly version: number
  readonly data: string
}

export const serve = (o: ServeOptions): Effect.Effect<number, CliError> =>
  Effect.gen(function* () {
    const t = new Timeline(o.session)
    for (const e of o.events) t.add(e)
    t.changes()
    let next = (o.events.at(-1)?.seq ?? -1) + 1
    const blobs = new Map<string, string>()
    const fetchFor = (marks: ReadonlyArray<Mark>) =>
      Effect.gen(function* () {
        const want = Details.allBlobs(marks).filter((h) => !blobs.has(h))
        if (want.length === 0) return
        for (const [h, text] of yield* Blobs.fetch(o.store, want)) blobs.set(h, text)
      })
    yield* fetchFor(t.marks)
    const token = randomBytes(16).toString("hex")
    const base = `/${token}/`
    let version = 0
    const updates: Array<Update> = []
    const clients = new Set<http.ServerResponse>()
    let port = 0

    const page = () =>
      Page.render(t, {
        blob: (h) => blobs.get(h),
        live: `${base}events?since=${version}`,
        generatedBy: `muse view --serve ${o.session}`
      })

    const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
      const host = String(req.headers.host ?? "")
      const url = new URL(req.url ?? "/", "http://127.0.0.1")
      const common = {
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
        "Cross-Origin-Resource-Policy": "same-origin"
      }
      if (host !== `127.0.0.1:${port}` && host !== `localhost:${port}`) {
        res.writeHead(421, { ...common, "Content-Type": "text/plain" }).end("wrong host\n")
        return
      }
      if (req.method !== "GET") {
        res.writeHead(405, { ...common, Allow: "GET", "Content-Type": "text/plain" }).end("GET only\n")
        return
      }
      if (url.pathname === base) {
        res
          .writeHead(200, {
            ...common,
            "Content-Type": "text/html; charset=utf-8",
            "Content-Security-Policy": Page.policy(true)
          })
          .end(page())
        return
      }
      if (url.pathname === `${base}events`) {
        const since = Number(url.searchParams.get("since") ?? version)
        res.writeHead(200, {
          ...common,
          "Content-Type": "text/event-stream; charset=utf-8",
          Connection: "keep-alive"
        })
        res.write("retry: 2000\n\n")
        const missed = updates.filter((u) => u.version > since)
        if (since < version && (updates.length === 0 || updates[0]!.version > since + 1)) {
          res.write("event: reload\ndata: {}\n\n")
        } else for (const u of missed) res.write(u.data)
        clients.add(res)
        req.on("close", () => clients.delete(res))
        return
      }
      res.writeHead(404, { ...common, "Content-Type": "text/plain" }).end("not found\n")
    }

    const server = http.createServer(handler)
    yield* Effect.addFinalizer(() =>
      Effect.async<void>((resume) => {
        for (const c of clients) c.end()
        server.close(() => resume(Effect.void))
        server.closeAllConnections?.()
      })
    )
    yield* Effect.async<void, CliError>((resume) => {
      server.once("error", (e) =>
        resume(
          Effect.fail(
            new CliError({
              code: ExitCode.Failed,
              message: `muse view --serve cannot listen on 127.0.0.1:${o.port ?? 0}: ${e.message}`
            })
          )
        )
      )
      server.listen(o.port ?? 0, "127.0.0.1", () => resume(Effect.void))
    })
    const address = server.address()
    port = typeof address === "object" && address ? address.port : 0
    const url = `http://127.0.0.1:${port}${base}`
    o.err.write(
      `serving ${o.session} (${Render.fmtInt(o.events.length)} events so far) at ${url}\nthe page follows the session as it runs; Ctrl-C stops serving\n`
    )
    o.out.write(`${url}\n`)
    o.onListening?.(url)
    if (o.open) {
      Open.inBrowser(url, o.err)
    }

    for (;;) {
      const fresh = yield* o.store.read(o.session, next).pipe(Effect.orElseSucceed(() => [] as Array<Event.Envelope>))
      if (fresh.length > 0) {
        for (const e of fresh) t.add(e)
        next = fresh.at(-1)!.seq + 1
        const changed = t.changes()
        yield* fetchFor(changed.marks)
        version++
        const data = JSON.stringify({
          version,
          meta: t.meta,
          lanes: changed.lanes.map(Page.encodeLane),
          marks: changed.marks.map(Page.encodeMark),
          usage: changed.usage.map(Page.encodeUsage),
          details: changed.marks.map((m) => [m.id, Page.encodeDetail(Details.of(m, t, (h) => blobs.get(h)))])
        })
        const update = { version, data: `event: update\nid: ${version}\ndata: ${data}\n\n` }
        updates.push(update)
        if (updates.length > KEPT) updates.shift()
        for (const c of clients) c.write(update.data)
      }
      yield* Effect.sleep(o.pollMs ?? 300)
    }
  }).pipe(Effect.scoped)
