/**
 * @musekit/core — contracts and machinery of MuseKit, with no Node imports.
 *
 * @example
 * ```ts
 * import { EventLog } from "@musekit/core"
 * ```
 */
export * as Event from "./Event.js"
export * as EventLog from "./EventLog.js"
export * as Redactor from "./Redactor.js"
