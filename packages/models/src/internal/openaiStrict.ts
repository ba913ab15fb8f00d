import { HttpClient, HttpClientRequest } from "@effect/platform"

const isRecord = (u: unknown): u is Record<string, any> => typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * Whether a JSON schema meets OpenAI's strict-mode rules: every object lists all of its
 * properties in `required` and has `additionalProperties: false`, all the way down.
 */
export const strictCompatible = (schema: unknown): boolean => {
  if (Array.isArray(schema)) return schema.every(strictCompatible)
  if (!isRecord(schema)) return true
  const isObject = schema.type === "object" || (Array.isArray(schema.type) && schema.type.includes("object"))
  if (isObject || schema.properties !== undefined) {
    if (schema.additionalProperties !== false) return false
    const keys = Object.keys(schema.properties ?? {})
    const required = new Set<string>(Array.isArray(schema.required) ? schema.required : [])
    if (!keys.every((k) => required.has(k))) return false
  }
  for (const key of ["properties", "$defs", "definitions", "patternProperties"]) {
    if (isRecord(schema[key]) && !Object.values(schema[key]).every(strictCompatible)) return false
  }
  for (const key of ["items", "prefixItems", "anyOf", "oneOf", "allOf", "not", "additionalProperties"]) {
    if (schema[key] !== undefined && typeof schema[key] !== "boolean" && !strictCompatible(schema[key])) return false
  }
  return true
}

/**
 * Sends each function tool (and a JSON response format) with `strict: true` only when its schema
 * allows it, so tools with optional parameters work instead of being rejected by OpenAI.
 */
export const strictWhereSafe = (client: HttpClient.HttpClient): HttpClient.HttpClient =>
  HttpClient.mapRequest(client, (request) => {
    if (request.method !== "POST" || request.body._tag !== "Uint8Array") return request
    if (!new URL(request.url, "http://x").pathname.endsWith("/responses")) return request
    let body: any
    try {
      body = JSON.parse(new TextDecoder().decode(request.body.body))
    } catch {
      return request
    }
    let changed = false
    for (const tool of Array.isArray(body?.tools) ? body.tools : []) {
      if (isRecord(tool) && tool.type === "function" && tool.strict === true && !strictCompatible(tool.parameters)) {
        tool.strict = false
        changed = true
      }
    }
    const format = body?.text?.format
    if (
      isRecord(format) &&
      format.type === "json_schema" &&
      format.strict === true &&
      !strictCompatible(format.schema)
    ) {
      format.strict = false
      changed = true
    }
    return changed ? HttpClientRequest.bodyUnsafeJson(request, body) : request
  })
