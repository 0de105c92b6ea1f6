// Instants as clients write them: an ISO 8601 date or date-time read the same on every server (UTC
// without an offset), to the millisecond and within years 0000-9999, as stored timestamps are.

/**
 * An ISO 8601 date or date-time with a 4-digit year: the date, the time, digits of a second below the
 * millisecond (which no stored value has), and the offset.
 */
const ISO_8601 = /^(\d{4}-\d{2}-\d{2})(?:(T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,3})?)?)(\d*)(Z|[+-]\d{2}:\d{2})?)?$/;
/**
 * What toInstant reads, as a JSON Schema pattern (the OpenAPI document's timestamp filters): months, days,
 * hours (24:00 too, the day's end), minutes, seconds and offsets in range, digits past the millisecond only
 * zeros. What no portable pattern says is left to toInstant: a day past its month's end, a year outside
 * 0000–9999 once in UTC.
 */
export const INSTANT_PATTERN =
  '^\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])(T(([01]\\d|2[0-3]):[0-5]\\d(:[0-5]\\d(\\.\\d{1,3}0*)?)?|24:00(:00(\\.0+)?)?)(Z|[+-]([01]\\d|2[0-3]):[0-5]\\d)?)?$';

/**
 * A date or date-time as a Date, or undefined when it is not ISO 8601, names no instant (`2026-02-30`
 * names none), lies outside years 0000-9999 in UTC, or is finer than a millisecond. A date-time
 * without an offset is UTC, as a date is: the same URL names the same instant on every server.
 */
export function toInstant(raw: string): Date | undefined {
  const parts = ISO_8601.exec(raw);
  if (!parts) return undefined;
  const [, day = '', time, finer = '', offset] = parts;
  if (finer !== '' && (!time?.includes('.') || /[^0]/.test(finer))) return undefined;
  const value = new Date(time === undefined ? day : `${day}${time}${offset ?? 'Z'}`);
  const year = value.getUTCFullYear();
  if (Number.isNaN(value.getTime()) || year < 0 || year > 9999) return undefined;
  // Date rolls a day past the month's end over into the next month; the calendar date must be as written.
  return new Date(`${day}T00:00:00Z`).toISOString().startsWith(day) ? value : undefined;
}
