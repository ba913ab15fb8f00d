/**
 * The footer's last line (model, approval mode, crew, tokens and cost) and the spinner line above
 * it while the agents work.
 *
 * @example
 * ```ts
 * statusLine(style, { model: "openai/gpt-4.1", approvalMode: "ask", crewEnabled: true, crew, totals })
 * // "openai/gpt-4.1 · ask · crew ready · 0 tokens"
 * ```
 */
import { type Style, truncate } from "../ansi.js"
import * as Render from "../render.js"
import type { CrewView } from "./crewPanel.js"

export const SPINNER = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]

export interface StatusInfo {
  readonly model: string
  readonly approvalMode: string
  readonly crewEnabled: boolean
  readonly crew: CrewView
  readonly totals: Render.Totals
}

export const statusLine = (s: Style, info: StatusInfo): string => {
  const working = info.crew.working()
  const crew = info.crewEnabled
    ? working.length > 0
      ? `crew ${working.length} working`
      : info.crew.size > 0
        ? `crew ${info.crew.size} idle`
        : "crew ready"
    : "no crew"
  const cost = info.totals.cost === undefined ? "" : ` · ${Render.fmtCost(info.totals.cost)}`
  return s.dim(`${info.model} · ${info.approvalMode} · ${crew} · ${Render.fmtInt(info.totals.tokens)} tokens${cost}`)
}

/** A retry of the model's HTTP client being waited for. */
export interface Retrying {
  readonly until: number
  readonly reason: string
  readonly attempt: number
  readonly of: number
}

/** What runs now: a tool (with its last line of output), or a phase ("thinking"). */
export interface Activity {
  label: string
  since: number
  output: string
}

/**
 * The spinner line with what runs and for how long (or the retry being waited for), and the
 * tool's last output line under it.
 */
export const busyLines = (
  s: Style,
  o: {
    readonly frame: number
    readonly width: number
    readonly phase: string
    readonly busySince: number
    readonly activity: Activity | undefined
    readonly retrying: Retrying | undefined
  }
): Array<string> => {
  const lines: Array<string> = []
  const frame = s.cyan(SPINNER[o.frame % SPINNER.length]!)
  const now = performance.now()
  const act = o.activity
  const retry = o.retrying
  const wait = retry ? Math.ceil((retry.until - Date.now()) / 1000) : 0
  const label =
    retry && wait > 0
      ? s.yellow(`retrying in ${wait} s: ${retry.reason} (retry ${retry.attempt} of ${retry.of})`)
      : act
        ? act.label
        : o.phase
  const elapsed = Render.fmtDuration(now - (act ? act.since : o.busySince))
  lines.push(truncate(`${frame} ${label} ${s.dim(`· ${elapsed}`)}`, o.width))
  if (act?.output) lines.push(truncate(s.dim(`  ${act.output}`), o.width))
  return lines
}
