from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path, Query, Request, Response

from api.auth import CollectorToken, ReadToken, WriteToken
from api.cache import Cacheable
from api.db import SessionDep
from api.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    Unauthorized,
    Unavailable,
    responses,
)
from api.measurements import service as measurement_service
from api.measurements.schemas import (
    MeasurementConfigurationRead,
    MeasurementCreate,
    MeasurementPage,
    MeasurementRead,
    MeasurementStart,
    MeasurementStatusRead,
    MeasurementStop,
    State,
)
from api.patterns import PAGE_CURSOR

router = APIRouter(prefix="/measurements", tags=["measurements"])
MeasurementId = Annotated[int, Path(ge=1, le=2_147_483_647, description="measurement id")]
WRITE_ERRORS = (Unauthorized, Forbidden, InvalidInput)


@router.post("", response_model=MeasurementRead, status_code=201,
             summary="Create a measurement (MEASCONFIGURE + optional START)",
             responses=responses(*WRITE_ERRORS, NotFound, Conflict))
def create_measurement(session: SessionDep, _: WriteToken, body: MeasurementCreate) -> MeasurementRead:
    return measurement_service.create(session, body)


@router.get("", response_model=MeasurementPage, summary="List measurements", dependencies=[Cacheable],
            responses=responses(Unauthorized, InvalidInput))
def list_measurements(
    session: SessionDep, _: ReadToken,
    state: Annotated[State | None, Query()] = None,
    name: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    cursor: Annotated[str | None, Query(pattern=PAGE_CURSOR,
                                        description="next_cursor of the previous page")] = None,
) -> MeasurementPage:
    return measurement_service.list_page(session, state=state, name=name, limit=limit, cursor=cursor)


@router.get("/{measurement_id}", response_model=MeasurementRead, summary="Show a measurement",
            dependencies=[Cacheable],
            responses=responses(Unauthorized, NotFound))
def get_measurement(session: SessionDep, _: ReadToken, measurement_id: MeasurementId) -> MeasurementRead:
    return measurement_service.get(session, measurement_id)


@router.post("/{measurement_id}/start", response_model=MeasurementRead,
             summary="START MEASUREMENT (FROM / TO / FOR / INTERVAL)",
             responses=responses(*WRITE_ERRORS, NotFound, Conflict))
def start_measurement(session: SessionDep, _: WriteToken, measurement_id: MeasurementId,
                      body: Annotated[MeasurementStart | None, Body()] = None) -> MeasurementRead:
    return measurement_service.start(session, measurement_id, body or MeasurementStart())


@router.post("/{measurement_id}/stop", response_model=MeasurementRead, summary="STOP MEASUREMENT",
             responses=responses(*WRITE_ERRORS, NotFound, Conflict))
def stop_measurement(session: SessionDep, _: WriteToken, measurement_id: MeasurementId,
                     body: Annotated[MeasurementStop | None, Body()] = None) -> MeasurementRead:
    return measurement_service.stop(session, measurement_id, body or MeasurementStop())


@router.delete("/{measurement_id}", status_code=204, response_class=Response,
               summary="Delete a measurement that is not collecting, with its data",
               responses=responses(Unauthorized, Forbidden, NotFound, Conflict))
def delete_measurement(session: SessionDep, _: WriteToken, measurement_id: MeasurementId) -> Response:
    measurement_service.delete(session, measurement_id)
    return Response(status_code=204)


@router.get("/{measurement_id}/status", response_model=MeasurementStatusRead,
            summary="MEASSTATUS (asks the running collector)",
            description="Asks the running collector through the control request bus (a row in "
                        "_measure.control_request), so it needs a read token even where reads of "
                        "stored data are open.",
            responses=responses(Unauthorized, NotFound, Conflict, Unavailable))
def get_measurement_status(request: Request, session: SessionDep, _: CollectorToken,
                           measurement_id: MeasurementId) -> MeasurementStatusRead:
    return measurement_service.status(session, request.app.state.engine, measurement_id,
                                      timeout=request.app.state.settings.control_timeout_seconds)


@router.get("/{measurement_id}/configuration", response_model=MeasurementConfigurationRead,
            summary="MEASREADCONF, and INFO MEASUREMENT's ADD/DELETE commands", dependencies=[Cacheable],
            responses=responses(Unauthorized, NotFound))
def get_measurement_configuration(session: SessionDep, _: ReadToken,
                                  measurement_id: MeasurementId) -> MeasurementConfigurationRead:
    return measurement_service.configuration(session, measurement_id)
