! The Fortran program of the link-route tests (tests/link/meson.build): `use mpi`, one rank
! sending itself a few integers, for the --wrap archive under MPICH's Fortran bindings.
program route_use_mpi
  use mpi
  implicit none
  integer :: ierr, rank, req(2), sent(4), got(4)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  sent = (/ 1, 2, 3, 4 /)
  got = 0
  call MPI_Irecv(got, 4, MPI_INTEGER, rank, 0, MPI_COMM_WORLD, req(1), ierr)
  call MPI_Isend(sent, 4, MPI_INTEGER, rank, 0, MPI_COMM_WORLD, req(2), ierr)
  call MPI_Waitall(2, req, MPI_STATUSES_IGNORE, ierr)
  call MPI_Finalize(ierr)
  if (any(got /= sent)) stop 1
end program route_use_mpi
